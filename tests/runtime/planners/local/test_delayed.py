"""DelayedPlanner adds its latency to the call and to the declared info."""

from __future__ import annotations

import time

import numpy as np
import pytest

from edgerl.runtime.planners.local.delayed import DelayedPlanner
from edgerl.runtime.planners.local.synthetic import burn_planner


def test_delayed_planner_adds_latency_and_keeps_the_observation_time():
    inner = burn_planner(horizon=5, action_dim=1, dt_s=0.02, period_s=0.1, latency_s=0.0)
    slow = DelayedPlanner(inner, 0.05)
    assert slow.info.expected_latency_s == pytest.approx(0.05)
    assert slow.info.horizon == 5 and slow.info.dt_s == 0.02
    t0 = time.perf_counter()
    chunk = slow.plan(np.zeros(3, np.float32), "", 7.0)
    assert time.perf_counter() - t0 >= 0.05
    assert chunk.obs_time == 7.0  # late, but stamped with the observation it was planned from


def test_delayed_planner_rejects_negative_delay():
    inner = burn_planner(horizon=5, action_dim=1, dt_s=0.02, period_s=0.1, latency_s=0.0)
    with pytest.raises(ValueError, match="planner delay must be >= 0"):
        DelayedPlanner(inner, -0.1)
