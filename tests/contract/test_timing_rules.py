"""``edgerl.contract.timing_rules``: the horizon, row, stale and blend rules as plain functions
(the spec that applies them: test_timing.py)."""

from __future__ import annotations

import numpy as np

from edgerl.contract.timing import (
    LatencyModel,
    blend_weight,
    chunk_row,
    chunk_usable,
    default_horizon,
    max_planner_delay,
    merge_weights,
    required_horizon,
)


class TestRules:
    def test_horizon_counts_jitter_extra_delay_and_lookahead(self):
        lat = LatencyModel(planner_delay_steps=10, planner_period_steps=10,
                           delay_jitter_steps=1.5)
        assert max_planner_delay(lat, extra_max=4) == 16
        assert required_horizon(lat, 2, extra_max=4) == 28
        assert default_horizon(lat, 2, extra_max=4) == 30
        assert default_horizon(LatencyModel(planner_delay_steps=1), 2) == 8  # floor
        # blend reads its blend length ahead: B = P = 10 rows instead of the lookahead
        assert default_horizon(LatencyModel(planner_delay_steps=2, planner_period_steps=10),
                               2, method="blend") == 10 + 2 + 10 + 2

    def test_rows_stale_and_blend(self):
        assert [chunk_row(o, 4) for o in (-1, 0, 3, 5)] == [0, 0, 3, 3]
        assert [bool(chunk_usable(o, 4, 2)) for o in (3, 5, 6)] == [True, True, False]
        np.testing.assert_allclose(merge_weights("blend", 5, 3), [0.25, 0.5, 0.75, 1, 1])
        np.testing.assert_allclose(merge_weights("average", 2, 3, 0.25), [0.25, 0.25])
        assert blend_weight(np.arange(3), 3).tolist() == [0.25, 0.5, 0.75]
