"""``edgerl bench ratios / train / spin`` through the CLI: ratios computed, history appended (tiny
sizes), bad flags named. The rows' arithmetic is tests/bench/test_ratios.py's."""

from __future__ import annotations

import json

import pytest

from edgerl.apps.cli import main
from edgerl.bench.ratio_history import plot_trend

TINY = ["--sim-tasks", "arm_reach", "--sim-envs", "4", "--sim-steps", "3", "--sim-repeats", "1",
        "--train-tasks", "cartpole", "--train-envs", "4", "--train-steps-per-env", "4",
        "--train-iterations", "1", "--train-repeats", "1", "--hil-runs", "0"]


def test_ratios_history_line_and_trend(tmp_path, capsys):
    history, png, store = tmp_path / "h.jsonl", tmp_path / "trend.png", tmp_path / "store"
    for _ in range(2):
        assert main(["bench", "ratios", *TINY, "--history", str(history), "--record",
                     str(store), "--png", str(png), "--json"]) == 0
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
    recorded = sorted((store / "runtime-timing" / "results").glob("bench-ratios-*.json"))
    assert len(recorded) == 2
    plot_trend([json.loads(x) for x in lines], png)  # redraw from the lines alone


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
    (["bench", "spin", "--loop-cpus", "2-1"], "CPU list '2-1'"),
    (["bench", "train", "--tasks", "nope"], "nope"),
    (["bench", "ratios", "--sim-envs", "0"], "must be >= 1"),
    (["bench", "ratios", "--hil-runs", "-1"], "--hil-runs must be >= 0"),
    (["bench", "ratios", "--miss-alpha", "0.5"], "--miss-alpha"),
])
def test_bad_input_is_a_named_error(argv, message, capsys):
    assert main(argv) != 0
    assert message in capsys.readouterr().err


@pytest.mark.hil
@pytest.mark.slow
def test_ratios_hil_row_against_the_host_firmware(capsys):
    """One real set (paced bench serial, bench serial, edgerl hil) on the host build."""
    pytest.importorskip("torch", reason="edgerl hil steps a torch plant")
    assert main(["bench", "ratios", "--sim-tasks", "", "--train-tasks", "", "--hil-runs", "1",
                 "--hil-episodes", "1", "--hil-max-steps", "40", "--history", "",
                 "--json"]) == 0
    line = json.loads(capsys.readouterr().out)
    (name, row), = line["ratios"].items()
    assert name == "hil/rtt_p99" and row["firmware_target"] == "host" and row["sets"] == 1
    assert row["ratio"] == pytest.approx(row["ours"] / row["reference"], rel=1e-2)
    assert row["met"] == (row["ratio"] <= 2.0) and row["sets_met"] == int(row["met"])


@pytest.mark.slow
def test_ratios_loop_rows_pool_the_pairs_counts(tmp_path, capsys):
    """Two short (bare, edit loop) pairs on a test bundle: the miss row's counts are the sums
    of the pairs' and its verdict is the test's (no timing asserted)."""
    from tests.helpers.task_bundles import write_task_bundle

    bundle = write_task_bundle(tmp_path / "bundle")
    assert main(["bench", "ratios", "--sim-tasks", "", "--train-tasks", "", "--hil-runs", "0",
                 "--bundle", str(bundle), "--loop-rate", "200", "--loop-seconds", "0.3",
                 "--loop-pairs", "2", "--ros2-seconds", "0", "--history", "", "--json"]) == 0
    ratios = json.loads(capsys.readouterr().out)["ratios"]
    assert set(ratios) == {"loop/jitter_p99", "loop/miss_rate"}
    miss = ratios["loop/miss_rate"]
    assert len(miss["pair_misses"]) == 2
    assert miss["k1"] == sum(p[0] for p in miss["pair_misses"])
    assert miss["k2"] == sum(p[1] for p in miss["pair_misses"])
    assert 100 <= miss["n1"] <= 130 and 100 <= miss["n2"] <= 130  # 2 x 0.3 s at 200 Hz
    assert miss["met"] == (miss["p_above"] > 0.05) and miss["limit"] == 1.5


@pytest.mark.slow
def test_ratios_loop_rows_with_a_pinned_planner_process(tmp_path, capsys):
    """``--planner-process --loop-cpus C --planner-cpus C``: the rows say how the loop and
    its planner ran (pinned CPUs, planner mode), and both loops ran their ticks."""
    import os

    from tests.helpers.task_bundles import write_task_bundle

    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("needs Linux sched_setaffinity")
    cpu = str(min(os.sched_getaffinity(0)))
    bundle = write_task_bundle(tmp_path / "bundle")
    assert main(["bench", "ratios", "--sim-tasks", "", "--train-tasks", "", "--hil-runs", "0",
                 "--bundle", str(bundle), "--loop-rate", "200", "--loop-seconds", "0.3",
                 "--planner-process", "--loop-cpus", cpu, "--planner-cpus", cpu,
                 "--ros2-seconds", "0", "--history", "", "--json"]) == 0
    ratios = json.loads(capsys.readouterr().out)["ratios"]
    for row in ratios.values():
        assert row["loop_cpus"] == cpu and row["planner_cpus"] == cpu
        assert row["planner_mode"] == "process"
    miss = ratios["loop/miss_rate"]
    assert 50 <= miss["n1"] <= 65 and 50 <= miss["n2"] <= 65  # 0.3 s at 200 Hz each


@pytest.mark.slow
@pytest.mark.ros
def test_ratios_ros2_rows_run_deploy_and_the_round_trip(tmp_path, capsys, monkeypatch):
    """The ros2 rows from a real 2 s ``edgerl deploy --trigger state``, ``edgerl bench loop``
    and an rclpy round trip at the bundle's 50 Hz: both rows positive, no target (no timing
    asserted)."""
    pytest.importorskip("rclpy")
    from tests.helpers.task_bundles import write_task_bundle

    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    bundle = write_task_bundle(tmp_path / "bundle")
    assert main(["bench", "ratios", "--sim-tasks", "", "--train-tasks", "", "--hil-runs", "0",
                 "--bundle", str(bundle), "--loop-pairs", "0", "--ros2-seconds", "2",
                 "--history", "", "--json"]) == 0
    ratios = json.loads(capsys.readouterr().out)["ratios"]
    assert set(ratios) == {"ros2/e2e_p99", "ros2/node_tick_p99"}
    for row in ratios.values():
        assert row["ours"] > 0 and row["reference"] > 0 and row["met"] is None
        assert row["ratio"] == pytest.approx(row["ours"] / row["reference"], rel=1e-2)
    assert ratios["ros2/e2e_p99"]["round_trips"] >= 80  # 100 paced at 20 ms, warm-up cut
