"""A MuJoCo backend's raw rate (the limit a task's step rate is reported against)."""

from __future__ import annotations

import pytest

from edgerl.sim.mujoco.backends import BACKENDS, load_model
from edgerl.sim.mujoco.raw_rate import raw_steps_per_s


def test_raw_throughput_is_measured_for_every_backend():
    arm_model = load_model("arm_planar.xml")
    for backend in BACKENDS:
        rate = raw_steps_per_s(arm_model, 8, 5, 2, backend=backend, warmup=1)
        assert 100.0 < rate < 1e9, backend


def test_raw_rate_refuses_zero_steps():
    with pytest.raises(ValueError, match="steps must be >= 1"):
        raw_steps_per_s(load_model("arm_planar.xml"), 2, 0, 1)
