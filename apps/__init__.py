"""edgerl.apps: the top layer: the ``edgerl`` command line, the demo and the soak test.

Nothing below imports this package; it may import every layer.
"""
