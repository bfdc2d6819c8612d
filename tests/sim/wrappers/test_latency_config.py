"""LatencyCfg: refused settings name the field; a manifest's timing gives the same wrapper."""

from __future__ import annotations

import pytest

from edgerl.contract.spec import LatencyModel
from edgerl.sim.wrappers import LatencyWrapper
from edgerl.sim.wrappers.latency_config import LatencyCfg
from tests.helpers.latency_env import DT, StepEnv


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"method": "teleport"}, "unknown method 'teleport'"),
    ({"edit_inputs": "some"}, "unknown edit_inputs 'some'"),
    ({"method": "edit", "privileged": True}, "nodelay upper bound"),
    ({"horizon": -1}, "horizon"),
    ({"arli_mid_fraction": 1.0}, "arli_mid_fraction"),
    ({"obs_noise_std": -0.1}, "obs_noise_std"),
])
def test_bad_settings_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LatencyCfg(**kwargs)


def test_latency_given_as_a_dict_becomes_a_model():
    cfg = LatencyCfg(latency={"planner_delay_steps": 3, "planner_period_steps": 2})
    assert cfg.latency == LatencyModel(planner_delay_steps=3, planner_period_steps=2)


def test_from_timing_rebuilds_the_wrappers_timing():
    lat = LatencyModel(planner_delay_steps=2, planner_period_steps=3)
    first = LatencyWrapper(StepEnv(2), LatencyCfg("edit", lat, control_dt=DT),
                           lambda obs, ids: obs.new_zeros(len(ids), 9, 1))
    again = LatencyCfg.from_timing(first.timing, "edit")
    assert again.horizon == first.horizon and again.latency == lat
    assert again.control_dt == pytest.approx(DT)
    twin = LatencyWrapper(StepEnv(2), again, lambda obs, ids: obs.new_zeros(len(ids), 9, 1))
    assert twin.timing == first.timing
