"""``edgerl bench sim``: the JSON object and its numbers."""

from __future__ import annotations

import json

import pytest

from edgerl.bench.sim.throughput import measure


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
    from edgerl.apps.cli import main

    args = ["bench", "sim", "--task", "cartpole", "--num-envs", "16", "--steps", "3", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_envs"] == 16 and out["steps"] == 3 and out["steps_per_s"] > 0
    assert main(["bench", "sim", "--task", "no_such_task", "--json"]) == 1
    assert "unknown task 'no_such_task'" in capsys.readouterr().err
    assert main(["bench", "sim", "--task", "cartpole", "--steps", "0"]) == 1


def test_mujoco_task_reports_the_same_state_reference():
    out = measure("ball_balance", num_envs=4, steps=3, warmup=1, repeats=2)
    assert out["raw_same_states_steps_per_s"] > 0
    assert out["overhead_ratio_same_states"] == pytest.approx(
        out["steps_per_s"] / out["raw_same_states_steps_per_s"])
    # torch tasks have no batch to replay
    assert "raw_same_states_steps_per_s" not in measure("cartpole", num_envs=4, steps=2, warmup=0)


def test_table_is_one_metric_per_row(capsys):
    from edgerl.apps.cli import main

    assert main(["bench", "sim", "--task", "cartpole", "--num-envs", "8", "--steps", "2"]) == 0
    out = capsys.readouterr().out
    assert "metric" in out and "value" in out
    row = next(line for line in out.splitlines() if "overhead_ratio" in line)
    assert float(row.replace("│", " ").split()[1]) > 0
