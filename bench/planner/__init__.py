"""Load on the planner server: closed-loop robots beside hostile clients, open-loop sweeps."""
