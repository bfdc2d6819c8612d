"""The language planner's manifest: method, chunk timing and the config it was trained with."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("mujoco")

from edgerl.policies.language.config import LanguagePlannerConfig
from edgerl.policies.language.instructions import make_task_env
from edgerl.policies.language.manifest import make_language_spec


def test_manifest_records_the_chunk_timing_and_the_config():
    cfg = LanguagePlannerConfig(horizon=6, period=3)
    env = make_task_env(cfg.task, 1, seed=0)
    task_spec = env.spec
    env.close()
    spec = make_language_spec(cfg, task_spec, expected_latency_s=0.02)
    hz = float(task_spec.control_hz)
    assert spec.method == "language_planner" and spec.task == "arm_reach"
    assert spec.chunk.horizon == 6 and spec.chunk.dt_s == pytest.approx(1.0 / hz)
    assert spec.chunk.period_s == pytest.approx(3 / hz)
    assert spec.chunk.expected_latency_s == 0.02 and spec.latency.planner_period_steps == 3
    assert spec.observation.names == list(task_spec.obs_names)
    assert spec.extra["language_planner"]["horizon"] == 6


def test_config_refuses_a_period_longer_than_the_horizon():
    with pytest.raises(ValueError, match="period"):
        LanguagePlannerConfig(horizon=4, period=5)
