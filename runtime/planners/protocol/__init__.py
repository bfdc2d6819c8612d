"""The planner-serving network protocol both ends speak: framing, authentication, messages."""
