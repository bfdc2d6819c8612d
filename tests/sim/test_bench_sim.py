"""``edgerl bench sim``: the JSON object and its numbers."""

from __future__ import annotations

import json

import pytest

from edgerl.sim.bench import measure


@pytest.mark.parametrize("task", ["cartpole", "driving"])
def test_measure_reports_positive_rates(task):
    out = measure(task, num_envs=32, steps=5, warmup=1, actions="expert")
    assert {"task", "backend", "num_envs", "steps_per_s", "raw_physics_steps_per_s"} <= set(out)
    assert out["task"] == task and out["backend"] == "torch" and out["num_envs"] == 32
    assert out["steps_per_s"] > 0 and out["raw_physics_steps_per_s"] > 0
    assert out["agent_steps_per_s"] == pytest.approx(out["steps_per_s"] * out["agents_per_env"])
    assert out["policy_agent_steps_per_s"] == out["steps_per_s"]  # one ego per env


def test_measure_through_latency_wrapper():
    out = measure("cartpole", num_envs=8, steps=4, warmup=1, method="edit")
    assert out["method"] == "edit" and out["steps_per_s"] > 0


def test_cli_json_and_unknown_task(capsys):
    from edgerl.cli import main

    args = ["bench", "sim", "--task", "cartpole", "--num-envs", "16", "--steps", "3", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_envs"] == 16 and out["steps"] == 3 and out["steps_per_s"] > 0
    assert main(["bench", "sim", "--task", "no_such_task", "--json"]) == 1
    assert "unknown task 'no_such_task'" in capsys.readouterr().err
    assert main(["bench", "sim", "--task", "cartpole", "--steps", "0"]) == 1
