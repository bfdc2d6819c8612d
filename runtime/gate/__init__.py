"""The planning-budget gate on the device: ``gate.onnx`` without torch, and the planner client
that asks for the budget it chooses."""
