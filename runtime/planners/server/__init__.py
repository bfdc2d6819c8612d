"""Serving a planner over TCP (``edgerl serve-planner``): connections, admission, batching."""
