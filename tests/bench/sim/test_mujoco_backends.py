"""The backend comparison CLI (python -m edgerl.bench.sim.mujoco_backends)."""

from __future__ import annotations

import json

import pytest

from edgerl.bench.sim.mujoco_backends import main


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
