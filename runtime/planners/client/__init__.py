"""Running any planner beside the edit loop: :class:`~.client.PlannerClient` (thread or
subprocess mode), its settings and its worker thread."""
