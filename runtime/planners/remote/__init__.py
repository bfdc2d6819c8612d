"""The robot side of a served planner: :class:`~.planner.RemotePlanner` (threaded, never
blocking the loop) and :class:`~.direct.DirectPlanner` (blocking, for batch callers)."""
