"""LoopMetrics: summary numbers, ring buffer, JSON and PNG export."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgerl.runtime.metrics import STATES, LoopMetrics


def test_summary_from_known_ticks():
    m = LoopMetrics(capacity=1000)
    for i in range(100):  # compute 1..100 us, jitter 0..99 us
        m.record((i) * 1e-6, (i + 1) * 1e-6, 0.05, 0, missed=(i == 99))
    m.record_skipped(2)
    m.planner_latency_s.extend([0.05, 0.07])
    s = m.summary()
    assert s["ticks"] == 100 and s["deadline_misses"] == 3 and s["skipped_ticks"] == 2
    assert s["tick_compute_p50_us"] == pytest.approx(50.5)
    assert s["tick_compute_p99_us"] == pytest.approx(np.percentile(np.arange(1, 101), 99))
    assert s["max_late_us"] == pytest.approx(99.0)
    assert s["deadline_miss_pct"] == pytest.approx(100 * 3 / 102)
    assert s["planner_latency_p50_ms"] == pytest.approx(60.0)
    assert s["chunk_age_p50_ms"] == pytest.approx(50.0)
    assert s["states"] == dict(zip(STATES, [100, 0, 0, 0, 0, 0, 0]))


def test_ring_keeps_last_capacity_ticks():
    m = LoopMetrics(capacity=10)
    for i in range(25):
        m.record(0.0, float(i), float("nan"), 0, False)
    assert m.ticks == 25
    assert m.summary()["tick_compute_p50_us"] == pytest.approx(np.median(np.arange(15, 25)) * 1e6)
    assert m.max_compute_s == 24.0


def test_json_and_png_export(tmp_path):
    m = LoopMetrics()
    rng = np.random.default_rng(0)
    for x in rng.exponential(20e-6, 500):
        m.record(x / 4, x, float("nan"), 0, False)
    doc = json.loads(m.save_json(tmp_path / "m.json", extra={"run": "t"}).read_text())
    h = doc["histograms"]["tick_compute_us"]
    assert sum(h["counts"]) == 500 and len(h["edges"]) == 51
    assert doc["summary"]["chunk_age_p50_ms"] is None and doc["run"] == "t"
    png = m.save_png(tmp_path / "lat.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_reset_forgets_ticks():
    m = LoopMetrics(capacity=8)
    for _ in range(5):
        m.record(1e-3, 1e-3, 0.1, 2, True)
    m.reset()
    m.record(2e-6, 4e-6, 0.1, 0, False)
    s = m.summary()
    assert s["ticks"] == 1 and s["deadline_misses"] == 0 and s["max_late_us"] == pytest.approx(2)
    assert s["tick_compute_p99_us"] == pytest.approx(4) and s["states"]["stale_chunk"] == 0


class _RecordingBetweenReads(LoopMetrics):
    """A LoopMetrics whose loop thread records a tick between any two reads of ``ticks``
    (what a 500 Hz loop does while the diagnostics thread summarises)."""

    @property
    def ticks(self) -> int:
        n = self._ticks
        self._ticks += 1  # one more tick lands right after this read
        return n

    @ticks.setter
    def ticks(self, value: int) -> None:
        self._ticks = value


def test_summary_while_the_loop_records_concurrently():
    """A regression: ``summary()`` read ``ticks`` once per array and
    subtracted windows of different lengths (ValueError: operands could not be broadcast),
    which killed the edit node's diagnostics in the soak."""
    m = _RecordingBetweenReads(capacity=64)
    for _ in range(10):
        m.record(0.0, 1e-4, 0.0, 0, False, send_s=2e-5)
    s = m.summary()
    assert s["tick_policy_p50_us"] == pytest.approx(80.0)
    assert s["send_p50_us"] == pytest.approx(20.0)


def test_miss_bursts_group_misses_within_the_gap():
    m = LoopMetrics(capacity=64, burst_gap_ticks=10)
    misses = {5, 6, 7, 15, 40, 51, 300}  # bursts: 5-7 and 15 (gap 8), 40, 51, 300
    for i in range(400):
        m.record(0.0, 1e-6, 0.0, 0, missed=i in misses)
    assert m.summary()["deadline_misses"] == 7
    assert m.summary()["miss_bursts"] == 4  # {5, 6, 7, 15}, {40}, {51}, {300}
    m.record_skipped(3)  # a late wake-up right after tick 400: a new burst
    m.record(0.0, 1e-6, 0.0, 0, missed=True)  # within the gap of the skip: the same burst
    s = m.summary()
    assert s["deadline_misses"] == 11 and s["miss_bursts"] == 5
    m.reset()
    assert m.summary()["miss_bursts"] == 0
    with pytest.raises(ValueError, match="burst_gap_ticks must be >= 1"):
        LoopMetrics(burst_gap_ticks=0)
