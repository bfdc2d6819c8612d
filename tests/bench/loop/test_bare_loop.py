"""The bare sleep+spin loop (the machine's limit) and the edit loop's ratios to it."""

from __future__ import annotations

import pytest

from edgerl.bench.loop.bare_loop import BareLoopConfig, loop_ratios, run_bare_loop


def test_bare_loop_ticks_at_its_rate():
    out = run_bare_loop(BareLoopConfig(rate_hz=500.0, seconds=0.4, warmup_s=0.05,
                                       work_us=20.0))
    # 200 deadlines in 0.4 s: every one is either ticked or counted as skipped (a stall at
    # the end also counts the deadlines it overran past the window, as the edit loop does)
    assert out["ticks"] <= 201
    assert out["ticks"] + out["skipped_ticks"] >= 195
    assert out["tick_compute_p50_us"] >= 20.0  # the busy work is inside the tick
    assert out["jitter_p50_us"] >= 0.0
    assert 0.0 <= out["deadline_miss_pct"] <= 100.0
    assert out["rt_priority_applied"] is False


def test_ratios_hand_computed():
    bare = {"ticks": 1000, "skipped_ticks": 0, "jitter_p99_us": 2.0, "deadline_misses": 4}
    loop = {"ticks": 990, "skipped_ticks": 10, "jitter_p99_us": 3.0, "deadline_misses": 12}
    assert loop_ratios(loop, bare) == {"jitter_p99_ratio": 1.5, "miss_rate_ratio": 3.0}
    # no bare miss: floored at one miss in its ticks; no miss on either side gives 0
    bare0 = {**bare, "deadline_misses": 0, "jitter_p99_us": 0.0}
    assert loop_ratios({**loop, "deadline_misses": 2}, bare0)["miss_rate_ratio"] == 2.0
    assert loop_ratios({**loop, "deadline_misses": 0}, bare0)["miss_rate_ratio"] == 0.0
    assert loop_ratios(loop, bare0)["jitter_p99_ratio"] == 30.0  # floored at 0.1 us


@pytest.mark.parametrize("kwargs, match", [({"rate_hz": 0.0}, "rate_hz"),
                                           ({"seconds": 0.0}, "seconds"),
                                           ({"spin_s": -1.0}, "spin_s"),
                                           ({"rt_priority": 100}, "rt_priority")])
def test_bad_config_is_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        BareLoopConfig(**kwargs)
