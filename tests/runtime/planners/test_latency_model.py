"""Fitting the simulator's delay model from measured planner latency; its JSON round trip."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.runtime.planners.latency_model import (
    delay_distribution,
    latency_model_from_samples,
    load_latency_model,
    save_latency_model,
)


class TestLatencyModel:
    def test_delay_is_the_first_control_tick_after_the_answer(self):
        # dt 20 ms: 1 ms and 19 ms -> usable 1 tick later, 21 ms -> 2, 50 ms -> 3, 0 -> 0
        probs = delay_distribution(np.array([0.001, 0.019, 0.021, 0.05, 0.0, 0.02]), 0.02)
        np.testing.assert_allclose(probs, [1 / 6, 3 / 6, 1 / 6, 1 / 6])

    def test_model_round_trips_through_json(self, tmp_path):
        model = latency_model_from_samples(np.array([0.03, 0.03, 0.05]), 0.02, period_steps=4)
        assert model.planner_delay_steps == 2 and model.planner_period_steps == 4
        path = save_latency_model(model, tmp_path / "lat.json")
        assert load_latency_model(path) == model

    def test_bad_samples_are_refused(self):
        with pytest.raises(ValueError, match="finite, non-negative"):
            delay_distribution(np.array([0.01, -1.0]), 0.02)
        with pytest.raises(ValueError, match="control_dt must be > 0"):
            delay_distribution(np.array([0.01]), 0.0)
