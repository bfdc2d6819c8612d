"""The bare sleep-then-spin loop, and the edit loop as ratios to it (``edgerl bench spin``).

:func:`bare` runs :func:`edgerl.bench.loop.bare_loop.run_bare_loop` (the edit loop's
scheduler with an empty tick): the machine's limit for a fixed-rate Python loop right now.
:func:`compare` alternates ``pairs`` times a bare block (this process) and an ``edgerl bench
loop`` block (a subprocess: the bundle's edit loop, burn planner beside it) with the same
rate, duration, spin and priority, and returns the edit loop's jitter p99 and miss rate as
ratios to the bare loop's (:func:`edgerl.bench.loop.bare_loop.loop_ratios`; medians over the
pairs) and the miss and tick counts of each side pooled over the pairs (what
:func:`edgerl.bench.count_ratio.rate_ratio_test` tests).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgerl.contract.errors import UserError

__all__ = ["SpinConfig", "bare", "compare", "edit_loop"]


@dataclass(frozen=True)
class SpinConfig:
    """The bare loop's blocks and, with a bundle, the edit loop's beside them.

    Attributes:
        rate_hz: Loop rate (Hz).
        seconds: Measured seconds per block.
        warmup_s: Seconds run before measuring.
        spin_us: Busy-wait this long before each deadline (us).
        switch_interval_us: ``sys.setswitchinterval`` while running (us); 0 leaves it.
        spin_switch_interval_us: The edit loop's switch interval inside its spin+tick window
            (us); 0 leaves it.
        prewarm_us: The edit loop's prewarm budget before the spin (us); 0 = off.
        rt_priority: SCHED_FIFO priority of the loop thread (0 = normal scheduling).
        work_us: Bare loop: busy work per tick (us), a stand-in for a tick's compute.
        loop_cpus: CPUs of both loops' threads, e.g. ``"1"`` (``""`` = not pinned).
        planner_cpus: CPUs of the edit loop's planner (client thread and process).
        bundle: The edit loop's bundle (``None``: bare blocks only).
        pairs: (bare, edit loop) pairs.
        planner_latency_ms: Burn planner CPU time per call (ms).
        planner_period_ms: Time between planner calls (ms).
        planner_process: Run the planner in a separate process.
    """

    rate_hz: float = 1000.0
    seconds: float = 5.0
    warmup_s: float = 0.5
    spin_us: float = 300.0
    switch_interval_us: float = 200.0
    spin_switch_interval_us: float = 5000.0
    prewarm_us: float = 150.0
    rt_priority: int = 0
    work_us: float = 0.0
    loop_cpus: str = ""
    planner_cpus: str = ""
    bundle: Path | None = None
    pairs: int = 1
    planner_latency_ms: float = 70.0
    planner_period_ms: float = 100.0
    planner_process: bool = False


def bare(cfg: SpinConfig) -> dict[str, Any]:
    """One bare-loop block with ``cfg``'s settings (``UserError`` for a bad CPU list)."""
    from edgerl.bench.loop.bare_loop import BareLoopConfig, run_bare_loop
    from edgerl.runtime.cpu_affinity import parse_cpus

    try:
        loop_cfg = BareLoopConfig(rate_hz=cfg.rate_hz, seconds=cfg.seconds,
                                  warmup_s=cfg.warmup_s, spin_s=cfg.spin_us * 1e-6,
                                  rt_priority=cfg.rt_priority,
                                  switch_interval_s=(cfg.switch_interval_us * 1e-6
                                                     if cfg.switch_interval_us > 0 else None),
                                  work_us=cfg.work_us, cpus=parse_cpus(cfg.loop_cpus))
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    return run_bare_loop(loop_cfg)


def edit_loop_argv(cfg: SpinConfig) -> list[str]:
    """``edgerl bench loop`` arguments with ``cfg``'s timing settings and burn planner."""
    argv = ["bench", "loop", "--bundle", str(cfg.bundle), "--rate", f"{cfg.rate_hz:g}",
            "--seconds", f"{cfg.seconds:g}", "--warmup", f"{cfg.warmup_s:g}",
            "--spin-us", f"{cfg.spin_us:g}",
            "--switch-interval-us", f"{cfg.switch_interval_us:g}",
            "--spin-switch-interval-us", f"{cfg.spin_switch_interval_us:g}",
            "--prewarm-us", f"{cfg.prewarm_us:g}",
            "--rt-priority", str(cfg.rt_priority), "--planner", "burn",
            "--planner-latency-ms", f"{cfg.planner_latency_ms:g}",
            "--planner-period-ms", f"{cfg.planner_period_ms:g}",
            "--loop-cpus", cfg.loop_cpus, "--planner-cpus", cfg.planner_cpus, "--json"]
    return argv + (["--planner-process"] if cfg.planner_process else [])


def edit_loop(cfg: SpinConfig) -> dict[str, Any]:
    """One ``edgerl bench loop --json`` block (subprocess) with the same timing settings;
    ``UserError`` with the end of its stderr when it fails."""
    res = subprocess.run([sys.executable, "-m", "edgerl.apps", *edit_loop_argv(cfg)],
                         capture_output=True, text=True,
                         timeout=120 + 2 * (cfg.seconds + cfg.warmup_s))
    if res.returncode != 0:
        tail = (res.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise UserError(f"edgerl bench loop failed (exit {res.returncode}): {tail}")
    return json.loads(res.stdout)


def compare(cfg: SpinConfig) -> dict[str, Any]:
    """``cfg.pairs`` interleaved (bare, loop) blocks; medians and the median ratios, and the
    miss and tick counts of each side summed over the pairs."""
    from edgerl.bench.loop.bare_loop import loop_ratios

    pairs = []
    for _ in range(cfg.pairs):
        b = bare(cfg)
        ln = edit_loop(cfg)
        pairs.append({"bare": b, "loop": ln, **loop_ratios(ln, b)})

    def med(side: str, key: str) -> float:
        return float(statistics.median(float(p[side][key]) for p in pairs))

    def total(side: str, *keys: str) -> int:
        return sum(int(p[side].get(k, 0)) for p in pairs for k in keys)

    return {"rate_hz": cfg.rate_hz, "seconds": cfg.seconds, "pairs": len(pairs),
            "rt_priority": cfg.rt_priority, "planner_mode":
                "process" if cfg.planner_process else "thread",
            "bare_jitter_p99_us": med("bare", "jitter_p99_us"),
            "loop_jitter_p99_us": med("loop", "jitter_p99_us"),
            "bare_miss_pct": med("bare", "deadline_miss_pct"),
            "loop_miss_pct": med("loop", "deadline_miss_pct"),
            "jitter_p99_ratio": statistics.median(p["jitter_p99_ratio"] for p in pairs),
            "miss_rate_ratio": statistics.median(p["miss_rate_ratio"] for p in pairs),
            # pooled over the pairs: the counts edgerl.bench.count_ratio tests
            "bare_misses": total("bare", "deadline_misses"),
            "bare_ticks": total("bare", "ticks", "skipped_ticks"),
            "loop_misses": total("loop", "deadline_misses"),
            "loop_ticks": total("loop", "ticks", "skipped_ticks"),
            "blocks": pairs}
