"""Raw MuJoCo throughput and the backend comparison CLI (python -m edgerl.sim.mujoco.bench)."""

from __future__ import annotations

import json

import pytest

from edgerl.sim.mujoco.backends import BACKENDS, load_model
from edgerl.sim.mujoco.bench import main, raw_steps_per_s


def test_raw_throughput_is_measured_for_every_backend():
    arm_model = load_model("arm_planar.xml")
    for backend in BACKENDS:
        rate = raw_steps_per_s(arm_model, 8, 5, 2, backend=backend, warmup=1)
        assert 100.0 < rate < 1e9, backend


def test_backend_comparison_cli_prints_json(capsys):
    assert main(["--tasks", "arm_reach", "--backends", "batch,loop", "--num-envs", "4",
                 "--steps", "5", "--repeats", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["task"], r["backend"]) for r in rows] == [("arm_reach", "batch"),
                                                         ("arm_reach", "loop")]
    for r in rows:
        assert r["steps_per_s"] > 0 and r["raw_physics_steps_per_s"] > 0
        assert 0.0 < r["ratio"] < 10.0 and r["best_steps_per_s"] >= r["steps_per_s"]
    with pytest.raises(SystemExit):
        main(["--tasks", "cartpole"])
