"""Planners that compute in this process: a bundle's ``planner.onnx``, the language planner,
fixed-latency and synthetic planners."""
