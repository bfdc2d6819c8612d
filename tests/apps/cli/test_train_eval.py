"""``edgerl train`` / ``edgerl eval`` end to end through the real CLI entry point."""

from __future__ import annotations

import json

import pytest

from edgerl.apps.cli import main

EVAL_KEYS = {"success_rate", "return_mean", "return_std", "episodes", "method", "task",
             "delay_steps", "delay_ms", "seed", "episode_length", "checkpoint", "run"}


def _train(tmp_path, capsys, method: str, *extra: str) -> str:
    out = tmp_path / method
    code = main(["train", "cartpole", "--method", method, "--delay-steps", "2", "--seed", "4",
                 "--num-envs", "8", "--iterations", "2", "--steps-per-env", "8",
                 "--out", str(out), "--no-progress", "--json", *extra])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["run"] == str(out)
    return str(out)


def test_train_then_eval_json(tmp_path, capsys):
    run = _train(tmp_path, capsys, "naive")
    code = main(["eval", run, "--episodes", "6", "--num-envs", "3", "--no-progress", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= EVAL_KEYS
    assert out["episodes"] == 6
    assert out["method"] == "naive" and out["task"] == "cartpole"
    assert out["delay_steps"] == 2 and out["delay_ms"] == pytest.approx(40.0)
    assert 0.0 <= out["success_rate"] <= 1.0
    assert out["return_std"] >= 0.0
    assert out["checkpoint"] == "model_1.pt"
    assert out["eval_seed"] == 1004


def test_eval_of_planner_baseline_succeeds(tmp_path, capsys):
    # the scripted expert's chunks balance the cart-pole at 40 ms delay
    run = _train(tmp_path, capsys, "planner")
    assert main(["eval", run, "--episodes", "8", "--no-progress", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["success_rate"] == 1.0
    assert out["checkpoint"] is None


def test_eval_bad_run_dir_is_a_clear_error(tmp_path, capsys):
    code = main(["eval", str(tmp_path / "nope"), "--episodes", "2"])
    assert code == 1
    assert "not a run directory" in capsys.readouterr().err


def test_train_bad_task_and_existing_out(tmp_path, capsys):
    assert main(["train", "no_such_task", "--no-progress"]) == 1
    assert "unknown task 'no_such_task'" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert main(["train", "cartpole", "--out", str(tmp_path / "full"), "--no-progress"]) == 1
    assert "not empty" in capsys.readouterr().err


def test_train_with_a_measured_latency_model(tmp_path, capsys):
    from edgerl.policies.runs import load_policy
    from edgerl.runtime.planners.latency_record import measure_latency, save_latency_file

    measured = measure_latency([0.045, 0.05, 0.07, 0.075], 50.0, period_steps=3,
                               source="deploy")  # 50 Hz: D = 3, 3, 4, 4
    model = save_latency_file(measured, tmp_path / "lat.json")
    out = tmp_path / "measured"
    assert main(["train", "cartpole", "--method", "edit", "--num-envs", "4", "--iterations",
                 "1", "--steps-per-env", "8", "--out", str(out), "--no-progress", "--json",
                 "--latency-model", str(model)]) == 0
    assert json.loads(capsys.readouterr().out)["delay_steps"] == 3  # the median names it
    spec = load_policy(out).spec
    assert spec.timing.latency.delay_distribution == [0.0, 0.0, 0.0, 0.5, 0.5]
    assert spec.timing.period_steps == 3 and spec.timing.max_delay_steps == 4
    assert spec.chunk.horizon == 3 + 4 + 2 + 2  # P + D_max + lookahead + margin

    save_latency_file(measure_latency([0.05], 100.0, 3, "hil"), tmp_path / "fast.json")
    assert main(["train", "cartpole", "--latency-model", str(tmp_path / "fast.json"),
                 "--out", str(tmp_path / "x")]) == 1
    assert "measured in steps of 100 Hz, but cartpole runs at 50 Hz" in capsys.readouterr().err
