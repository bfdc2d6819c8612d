"""Short load test: 48 robots beside 16 hostile clients (4 idle, 4 slowloris,
4 oversized, 4 malformed) on 127.0.0.1, each group in its own child process. The hostile
clients come and go in 1 s windows, so the robots' latency with and without them is measured
side by side under the same background load: the median over windows of each window's p99
with the hostile clients stays within 2x of the same without (one neighbour's burst moves
one window; a server the hostile clients slow moves every active window), every robot
request is answered and no thread dies. The 60 s version is
``edgerl bench planner --load-test`` (numbers in docs/planner.md)."""

from __future__ import annotations

import statistics

import pytest

from edgerl.bench.planner.hostile_test import run_hostile
from edgerl.bench.planner.load import LoadConfig, LoadResult


def test_hostile_clients_do_not_hurt_well_behaved_ones():
    run = run_hostile(10.0, 1.0, idle_timeout_s=0.5, read_timeout_s=0.3)
    cfg, result, metrics, died = run.cfg, run.result, run.metrics, run.died
    assert died == []
    assert metrics["internal"] == 0
    assert metrics["threads_alive"] == {"loop": True, "worker": True}
    assert result.replies["chunk"] >= 0.99 * sum(result.replies.values()) > 2000, result.replies
    # each hostile kind was met with its named answer, and cut off
    h = result.hostile
    assert h["idle:idle_timeout"] >= 8 and h["slowloris:read_timeout"] >= 8, h
    assert h["oversized:frame_too_large"] >= 8 and h["oversized:quota_exceeded"] >= 8, h
    assert h["malformed:malformed"] >= 100, h
    # every idle cut-off the clients saw was counted by the server; the server may count up to
    # one more per idle client, cut off as the run ended, before that client read the answer
    idle_clients = cfg.hostile["idle"]
    assert (h["idle:idle_timeout"] <= metrics["dropped"]["idle_timeout"]
            <= h["idle:idle_timeout"] + idle_clients), (metrics["dropped"], h)
    with_hostile, without = result.split(cfg)
    assert min(len(with_hostile.latencies_s), len(without.latencies_s)) > 1000
    p99_on, p99_off = result.window_percentiles_ms(cfg, 99)
    assert min(len(p99_on), len(p99_off)) >= 4, (p99_on, p99_off)  # of 5 each
    median_on, median_off = statistics.median(p99_on), statistics.median(p99_off)
    assert median_on <= 2.0 * median_off, (
        f"robots' p99 per window {p99_on} ms beside hostile clients vs {p99_off} ms without "
        f"(pooled {with_hostile.percentile_ms(99):.1f} vs {without.percentile_ms(99):.1f} ms)")


def _result(started_at: float, sent_at: list[float]) -> LoadResult:
    return LoadResult(latencies_s=[0.001 * (i + 1) for i in range(len(sent_at))],
                      sent_at=sent_at, started_at=started_at)


def test_windows_count_from_when_the_run_started_not_from_the_callers_config():
    cfg = LoadConfig(hostile_on_s=1.0, hostile_off_s=1.0)  # start_at=0: "now"
    on, off = _result(100.7, [100.8, 101.6, 102.0, 102.8]).split(cfg)
    assert on.sent_at == [100.8, 101.6, 102.8] and off.sent_at == [102.0]
    assert on.latencies_s == [0.001, 0.002, 0.004]


def test_window_percentiles_are_per_window_and_skip_thin_windows():
    cfg = LoadConfig(hostile_on_s=1.0, hostile_off_s=1.0)
    # windows from t=10: on [10,11) 60 answers of 5 ms, off [11,12) 60 of 1 ms, on [12,13)
    # 60 of 9 ms, off [13,14) only 10 answers (left out)
    sent = [10 + i / 60 for i in range(60)] + [11 + i / 60 for i in range(60)] + \
        [12 + i / 60 for i in range(60)] + [13 + i / 10 for i in range(10)]
    lat = [0.005] * 60 + [0.001] * 60 + [0.009] * 60 + [0.1] * 10
    result = LoadResult(latencies_s=lat, sent_at=sent, started_at=10.0)
    on, off = result.window_percentiles_ms(cfg, 99)
    assert on == pytest.approx([5.0, 9.0]) and off == pytest.approx([1.0])
    with pytest.raises(ValueError, match="hostile_on_s and hostile_off_s"):
        result.window_percentiles_ms(LoadConfig(), 99)
