"""``DelayedPlanner``: any planner made slower by a fixed latency per call (a fast network
standing in for a slow foundation model, in deployments, HIL runs and benchmarks)."""

from __future__ import annotations

import time

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.planner import PlannerHealth, PlannerInfo

__all__ = ["DelayedPlanner"]


class DelayedPlanner:
    """Wraps a planner and sleeps ``delay_s`` after each plan: its chunks arrive as late as a
    slow model's would (the chunk keeps the observation time it was planned from)."""

    def __init__(self, inner: object, delay_s: float) -> None:
        if not delay_s >= 0:
            raise ValueError(f"planner delay must be >= 0 s, got {delay_s}")
        self.inner, self.delay_s = inner, float(delay_s)
        info = inner.info  # type: ignore[attr-defined]
        self.info = PlannerInfo(horizon=info.horizon, action_dim=info.action_dim,
                                dt_s=info.dt_s, period_s=info.period_s,
                                expected_latency_s=info.expected_latency_s + self.delay_s)

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        chunk = self.inner.plan(observation, instruction, now)  # type: ignore[attr-defined]
        time.sleep(self.delay_s)
        return chunk

    def health(self) -> PlannerHealth:
        return self.inner.health()  # type: ignore[attr-defined]
