"""MJCF models shipped with edgerl as package data (``mujoco_batch.load_model(name)``)."""
