"""Language-conditioned chunk planner: config, instructions, network (``head``), training,
evaluation, adapters to the sim wrappers and runtime, and the bundle manifest."""
