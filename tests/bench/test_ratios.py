"""``edgerl.bench.ratios``: the targets, and each row computed from its measurements (no run)."""

from __future__ import annotations

import pytest

from edgerl.bench.ratios import hil_row, meets, miss_rate_row, ros2_rows


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

