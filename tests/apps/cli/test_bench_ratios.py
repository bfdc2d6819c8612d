"""``edgerl bench ratios / train / spin``: ratios computed, history appended (tiny sizes)."""

from __future__ import annotations

import json

import pytest

from edgerl.apps.cli import main
from edgerl.apps.cli.bench.ratios import hil_row, meets, miss_rate_row, plot_trend, ros2_rows

TINY = ["--sim-tasks", "arm_reach", "--sim-envs", "4", "--sim-steps", "3", "--sim-repeats", "1",
        "--train-tasks", "cartpole", "--train-envs", "4", "--train-steps-per-env", "4",
        "--train-iterations", "1", "--train-repeats", "1", "--hil-runs", "0"]


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
    assert meets("hil/rtt_p99", 2.0) and not meets("hil/rtt_p99", 2.01)
    assert meets("sim/arm_reach", {"ratio": 0.8}) and not meets("hil/rtt_p99", {"ratio": 2.5})
    # no target in the issue: reported, never met or failed
    assert meets("ros2/e2e_p99", 0.1) is None and meets("ros2/node_tick_p99", {"ratio": 9}) is None


def test_ros2_rows_are_ours_over_the_reference():
    rtt = {"rtt_p99_us": 400.0, "rtt_p50_us": 250.0, "n": 450}
    deploy = {"e2e_latency_p99_us": 1000.0, "e2e_latency_p50_us": 600.0,
              "edit_tick_compute_p99_us": 90.0, "edit_tick_compute_p50_us": 60.0}
    loop = {"tick_compute_p99_us": 60.0, "tick_compute_p50_us": 40.0}
    rows = ros2_rows(rtt, deploy, loop)
    assert rows["ros2/e2e_p99"]["ratio"] == 2.5 and rows["ros2/e2e_p99"]["reference"] == 400.0
    assert rows["ros2/node_tick_p99"]["ratio"] == 1.5
    assert rows["ros2/e2e_p99"]["ours_p50"] == 600.0 and rows["ros2/e2e_p99"]["round_trips"] == 450
    with pytest.raises(ValueError, match="edgerl deploy has no positive e2e_latency_p99_us"):
        ros2_rows(rtt, {**deploy, "e2e_latency_p99_us": None}, loop)
    with pytest.raises(ValueError, match="bench loop has no positive tick_compute_p99_us"):
        ros2_rows(rtt, deploy, {})


def _counts(loop: int, bare: int, ticks: int = 10_000) -> dict:
    return {"loop_misses": loop, "loop_ticks": ticks, "bare_misses": bare, "bare_ticks": ticks}


@pytest.mark.parametrize("loop, bare, met, verdict", [
    (0, 0, True, "inconclusive"), (3, 1, True, "inconclusive"), (7, 0, False, "above"),
    (30, 10, False, "above"), (100, 10, False, "above"), (2, 60, True, "below"),
])
def test_miss_rate_row_is_judged_by_the_test_not_the_point_ratio(loop, bare, met, verdict):
    row = miss_rate_row(_counts(loop, bare))
    assert row["met"] is met and meets("loop/miss_rate", row) is met
    assert row["verdict"] == verdict and row["limit"] == 1.5
    assert row["ours"] == pytest.approx(loop / 100)  # rates in %
    assert row["reference"] == pytest.approx(bare / 100)
    assert row["ratio"] == pytest.approx((loop + 0.5) / (bare + 0.5), rel=1e-3)
    assert (row["k1"], row["k2"], row["n1"]) == (loop, bare, 10_000)


def _set(hil_p99: float, paced_p99: float, b2b_p99: float = 400.0, other_rt=None) -> dict:
    """A set as :func:`edgerl.bench.hil.rt_ratio.pair` returns it (the keys the row reads)."""
    ratio, ratio_b2b = hil_p99 / paced_p99, hil_p99 / b2b_p99
    return {"load1": 5.0, "target": "host", "rt_priority": 10, "rt_granted": True,
            "hil_p99_us": hil_p99, "bench_paced_p99_us": paced_p99,
            "bench_b2b_p99_us": b2b_p99, "ratio": round(ratio, 3), "met_2x": ratio <= 2.0,
            "ratio_b2b": round(ratio_b2b, 3), "met_2x_b2b": ratio_b2b <= 2.0,
            "other_rt": other_rt or {}}


def test_hil_row_is_the_median_set_ratio_against_two():
    row = hil_row([_set(1000.0, 2000.0), _set(9000.0, 2000.0, other_rt={"1 x": 80}),
                   _set(3000.0, 2000.0)])
    assert row["ratio"] == 1.5 and meets("hil/rtt_p99", row)  # median of 0.5, 4.5, 1.5
    assert row["ours"] == 3000.0 and row["reference"] == 2000.0 and row["unit"] == "us"
    assert row["sets"] == 3 and row["sets_met"] == 2 and row["other_rt"] == [0, 1, 0]
    assert row["set_ratios"] == [0.5, 4.5, 1.5] and row["set_ratios_b2b"] == [2.5, 22.5, 7.5]
    one = hil_row([_set(5000.0, 2000.0)])
    assert one["ratio"] == 2.5 and not meets("hil/rtt_p99", one)
    with pytest.raises(ValueError, match="at least one set"):
        hil_row([])


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
