"""The package version (single source: read by setuptools and by ``edgerl --version``)."""

__version__ = "0.1.0"
