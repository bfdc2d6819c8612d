"""MJCF models shipped with edgerl as package data (``sim.mujoco.backends.load_model(name)``)."""
