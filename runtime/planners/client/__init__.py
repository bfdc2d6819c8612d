"""Running any planner beside the edit loop: :class:`~.client.PlannerClient` (thread or
subprocess mode) and its worker thread."""
