"""``edgerl bench ratios / train / spin``: ratios computed, history appended (tiny sizes)."""

from __future__ import annotations

import json

import pytest

from edgerl.cli import main
from edgerl.cli.bench_ratios import meets, plot_trend

TINY = ["--sim-tasks", "arm_reach", "--sim-envs", "4", "--sim-steps", "3", "--sim-repeats", "1",
        "--train-tasks", "cartpole", "--train-envs", "4", "--train-steps-per-env", "4",
        "--train-iterations", "1", "--train-repeats", "1"]


def test_ratios_history_line_and_trend(tmp_path, capsys):
    history, png = tmp_path / "h.jsonl", tmp_path / "trend.png"
    for _ in range(2):
        assert main(["bench", "ratios", *TINY, "--history", str(history), "--png", str(png),
                     "--json"]) == 0
        line = json.loads(capsys.readouterr().out)
        assert set(line["ratios"]) == {"sim/arm_reach", "train/cartpole"}
        for r in line["ratios"].values():
            assert r["ours"] > 0 and r["reference"] > 0 and r["ratio"] > 0
        train = line["ratios"]["train/cartpole"]  # one pair: the ratio of its two rates
        assert train["ratio"] == pytest.approx(train["ours"] / train["reference"], rel=2e-2)
        assert len(line["load_before"]) == 3 and line["utc"].endswith("Z")
    lines = history.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1]) == line
    assert png.stat().st_size > 1000
    plot_trend(history, png)  # redraw from the file alone


def test_targets():
    assert meets("sim/arm_reach", 0.75) and not meets("sim/arm_reach", 0.74)
    assert meets("train/cartpole", 0.5) and not meets("train/cartpole", 0.49)
    assert meets("loop/jitter_p99", 1.5) and not meets("loop/miss_rate", 1.51)


def test_bench_train_json(capsys):
    assert main(["bench", "train", "--tasks", "cartpole", "--num-envs", "4", "--steps-per-env",
                 "4", "--iterations", "1", "--repeats", "1", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    (ours, bare), = row["pairs"]
    assert row["ratio"] == pytest.approx(ours / bare, rel=2e-2)


def test_bench_spin_bare_json(capsys):
    assert main(["bench", "spin", "--rate", "500", "--seconds", "0.2", "--warmup", "0",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rate_hz"] == 500.0 and out["ticks"] + out["skipped_ticks"] >= 95


@pytest.mark.parametrize("argv, message", [
    (["bench", "spin", "--bundle", "/nonexistent"], "not a bundle"),
    (["bench", "spin", "--seconds", "0"], "--seconds"),
    (["bench", "train", "--tasks", "nope"], "nope"),
    (["bench", "ratios", "--sim-envs", "0"], "must be >= 1"),
])
def test_bad_input_is_a_named_error(argv, message, capsys):
    assert main(argv) != 0
    assert message in capsys.readouterr().err
