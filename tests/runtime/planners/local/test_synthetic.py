"""Stand-in planners for benchmarks and tests: BurnPlanner's chunks."""

from __future__ import annotations

import numpy as np

from edgerl.contract.planner import PlannerInfo
from edgerl.runtime.planners.local.synthetic import BurnPlanner

INFO = PlannerInfo(horizon=5, action_dim=2, dt_s=0.01, period_s=0.02, expected_latency_s=0.0)


def test_burn_planner_chunk_values():
    p = BurnPlanner(INFO, latency_s=0.0, amplitude=2.0, freq_hz=0.0, low=[-1, -1], high=[1, 1])
    c = p.plan(np.zeros(3, np.float32), "", 1.0)
    # sin(phase_j) * 2 clipped: column 0 -> 0, column 1 -> sin(1)*2 > 1 -> 1
    np.testing.assert_allclose(c.actions[:, 0], 0.0, atol=1e-7)
    np.testing.assert_allclose(c.actions[:, 1], 1.0)
    assert c.t0 == 1.0 and c.horizon == 5
