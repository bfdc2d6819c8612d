"""The bare sleep-then-spin loop: the machine's own timing limit for a fixed-rate loop.

:func:`run_bare_loop` runs the edit loop's scheduler with nothing in the tick: absolute
deadlines ``start + n * period``, :meth:`MonotonicClock.sleep_until` (sleep, then spin the last
``spin_s``), the same skip rule and miss definition as
:meth:`edgerl.runtime.loop_scheduler.LoopScheduler._loop_on_clock`, the same thread set-up
(``SCHED_FIFO`` priority, ``gc.freeze``, ``sys.setswitchinterval``) and the same
:class:`~edgerl.runtime.metrics.LoopMetrics`. Whatever jitter and misses it shows on a machine
come from the OS and the other load, not from edgerl; ``edgerl bench spin`` reports the edit
loop's figures as ratios to it, measured in the same run (:func:`loop_ratios`).
"""

from __future__ import annotations

import gc
import sys
import threading
from dataclasses import dataclass
from typing import Any

from edgerl.contract.clock import MonotonicClock
from edgerl.runtime.cpu_affinity import check_cpus, pin_thread
from edgerl.runtime.metrics import LoopMetrics

__all__ = ["BareLoopConfig", "loop_ratios", "run_bare_loop"]


@dataclass
class BareLoopConfig:
    """The bare loop's settings (the edit loop's ``LoopConfig`` names and defaults).

    Attributes:
        rate_hz: Loop rate (Hz).
        seconds: Measured duration (s), after ``warmup_s``.
        warmup_s: Run before measuring (s).
        spin_s: Busy-wait this long before each deadline (s).
        rt_priority: ``SCHED_FIFO`` priority of the loop thread (0 = normal scheduling).
        gc_freeze: ``gc.freeze()`` while running.
        switch_interval_s: ``sys.setswitchinterval`` while running (None = unchanged).
        work_us: Busy work per tick (us) standing in for a tick's compute (0 = none).
        cpus: CPUs the loop thread is pinned to (``()`` = not pinned), as the edit loop's
            ``LoopConfig.cpus``.
    """

    rate_hz: float = 1000.0
    seconds: float = 5.0
    warmup_s: float = 0.5
    spin_s: float = 300e-6
    rt_priority: int = 0
    gc_freeze: bool = True
    switch_interval_s: float | None = 200e-6
    work_us: float = 0.0
    cpus: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.rate_hz > 0:
            raise ValueError(f"rate_hz must be > 0, got {self.rate_hz}")
        if not self.seconds > 0 or self.warmup_s < 0:
            raise ValueError("seconds must be > 0 and warmup_s >= 0")
        if self.spin_s < 0 or self.work_us < 0:
            raise ValueError("spin_s and work_us must be >= 0")
        if not 0 <= self.rt_priority <= 99:
            raise ValueError(f"rt_priority must be in 0..99, got {self.rt_priority}")
        self.cpus = check_cpus(self.cpus, "bare loop cpus")


def _ticks(cfg: BareLoopConfig, metrics: LoopMetrics, seconds: float, clock: MonotonicClock
           ) -> None:
    period = 1.0 / cfg.rate_hz
    work_s = cfg.work_us * 1e-6
    now = clock.now
    deadline = now() + period
    end = deadline + seconds
    while deadline < end:
        clock.sleep_until(deadline)
        woke = now()
        late = woke - deadline
        if late > period:  # woke after the next deadline: skip the missed ones, keep the grid
            k = int(late // period)
            metrics.record_skipped(k)
            deadline += k * period
        if work_s:
            stop = woke + work_s
            while now() < stop:
                pass
        done = now()
        metrics.record(late, done - woke, 0.0, 0, done > deadline + period)
        deadline += period


def run_bare_loop(cfg: BareLoopConfig) -> dict[str, Any]:
    """Run the bare loop in its own thread; returns the metrics summary (the edit loop's
    keys: ``ticks``, ``jitter_p50_us``, ``jitter_p99_us``, ``deadline_misses``,
    ``deadline_miss_pct``, ``max_late_us``...) plus ``rate_hz``, ``rt_priority_applied`` and
    ``cpus`` (the thread's affinity when pinned, else ``[]``)."""
    metrics = LoopMetrics(capacity=max(1024, int(cfg.rate_hz * cfg.seconds) + 16))
    clock = MonotonicClock(cfg.spin_s)
    result: dict[str, Any] = {}

    def main() -> None:
        applied = False
        if cfg.rt_priority:
            from edgerl.runtime.loop_scheduler import set_fifo

            applied = set_fifo(cfg.rt_priority)
        result["rt_priority_applied"] = applied
        try:
            result["cpus_applied"] = list(pin_thread(cfg.cpus, "bare loop cpus"))
            if cfg.warmup_s:
                _ticks(cfg, metrics, cfg.warmup_s, clock)
            metrics.reset()
            _ticks(cfg, metrics, cfg.seconds, clock)
        except BaseException as exc:  # surfaced in the caller
            result["error"] = exc

    old_switch = sys.getswitchinterval()
    if cfg.switch_interval_s is not None:
        sys.setswitchinterval(cfg.switch_interval_s)
    if cfg.gc_freeze:
        gc.collect()
        gc.freeze()
    try:
        thread = threading.Thread(target=main, name="edgerl-bare-loop", daemon=True)
        thread.start()
        thread.join()
    finally:
        if cfg.gc_freeze:
            gc.unfreeze()
        sys.setswitchinterval(old_switch)
    if "error" in result:
        raise RuntimeError(f"bare loop died: {result['error']}") from result["error"]
    summary = metrics.summary()
    keys = ("ticks", "tick_compute_p50_us", "tick_compute_p99_us", "jitter_p50_us",
            "jitter_p99_us", "deadline_misses", "skipped_ticks", "miss_bursts",
            "deadline_miss_pct", "max_late_us")
    return {"rate_hz": cfg.rate_hz, "seconds": cfg.seconds, "spin_us": cfg.spin_s * 1e6,
            "rt_priority": cfg.rt_priority, "rt_priority_applied": result["rt_priority_applied"],
            "work_us": cfg.work_us, "cpus": result.get("cpus_applied", []),
            **{k: summary[k] for k in keys}}


def loop_ratios(loop: dict[str, Any], bare: dict[str, Any]) -> dict[str, float]:
    """The edit loop's timing as ratios to the bare loop's (same run).

    ``jitter_p99_ratio`` = loop p99 / bare p99 (the bare p99 floored at 0.1 us, the clock's
    resolution in practice). ``miss_rate_ratio`` = loop miss rate / bare miss rate, the bare
    rate floored at one miss in its ticks (a bare run without a miss only bounds the machine's
    rate from above), so 0 misses in both gives 0.
    """
    bare_jitter = max(float(bare["jitter_p99_us"]), 0.1)
    bare_ticks = max(1, int(bare["ticks"]) + int(bare.get("skipped_ticks", 0)))
    bare_rate = max(float(bare["deadline_misses"]), 1.0) / bare_ticks
    loop_ticks = max(1, int(loop["ticks"]) + int(loop.get("skipped_ticks", 0)))
    loop_rate = float(loop["deadline_misses"]) / loop_ticks
    return {"jitter_p99_ratio": round(float(loop["jitter_p99_us"]) / bare_jitter, 3),
            "miss_rate_ratio": round(loop_rate / bare_rate, 3)}
