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

from edgerl.bench.loop.timing import LoopTiming
from edgerl.contract.errors import UserError

__all__ = ["SpinConfig", "bare", "compare", "edit_loop"]


@dataclass(frozen=True)
class SpinConfig:
    """The bare loop's blocks and, with a bundle, the edit loop's beside them.

    Attributes:
        bundle: The edit loop's bundle (``None``: bare blocks only).
        pairs: (bare, edit loop) pairs.
        loop_cpus: CPUs of both loops' threads, e.g. ``"1"`` (``""`` = not pinned).
        planner_cpus: CPUs of the edit loop's planner (client thread and process).
        timing: Both loops' rate, seconds per block, warm-up, spin, switch intervals and
            priority (the spin switch interval and prewarm are the edit loop's alone).
        work_us: Bare loop: busy work per tick (us), a stand-in for a tick's compute.
        planner_latency_ms: Burn planner CPU time per call (ms).
        planner_period_ms: Time between planner calls (ms).
        planner_process: Run the planner in a separate process.
    """

    bundle: Path | None = None
    pairs: int = 1
    loop_cpus: str = ""
    planner_cpus: str = ""
    timing: LoopTiming = LoopTiming(rate_hz=1000.0, seconds=5.0, warmup_s=0.5)
    work_us: float = 0.0
    planner_latency_ms: float = 70.0
    planner_period_ms: float = 100.0
    planner_process: bool = False


def bare(cfg: SpinConfig) -> dict[str, Any]:
    """One bare-loop block with ``cfg``'s settings (``UserError`` for a bad CPU list)."""
    from edgerl.bench.loop.bare_loop import BareLoopConfig, run_bare_loop
    from edgerl.runtime.cpu_affinity import parse_cpus

    t = cfg.timing
    try:
        loop_cfg = BareLoopConfig(rate_hz=t.rate_hz, seconds=t.seconds, warmup_s=t.warmup_s,
                                  spin_s=t.spin_us * 1e-6, rt_priority=t.rt_priority,
                                  switch_interval_s=t.interval_s(t.switch_interval_us),
                                  work_us=cfg.work_us, cpus=parse_cpus(cfg.loop_cpus))
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    return run_bare_loop(loop_cfg)


def edit_loop_argv(cfg: SpinConfig) -> list[str]:
    """``edgerl bench loop`` arguments with ``cfg``'s timing settings and burn planner."""
    argv = ["bench", "loop", "--bundle", str(cfg.bundle), *cfg.timing.argv(),
            "--planner", "burn", "--planner-latency-ms", f"{cfg.planner_latency_ms:g}",
            "--planner-period-ms", f"{cfg.planner_period_ms:g}",
            "--loop-cpus", cfg.loop_cpus, "--planner-cpus", cfg.planner_cpus, "--json"]
    return argv + (["--planner-process"] if cfg.planner_process else [])


def edit_loop(cfg: SpinConfig) -> dict[str, Any]:
    """One ``edgerl bench loop --json`` block (subprocess) with the same timing settings;
    ``UserError`` with the end of its stderr when it fails."""
    res = subprocess.run([sys.executable, "-m", "edgerl.apps", *edit_loop_argv(cfg)],
                         capture_output=True, text=True,
                         timeout=120 + 2 * (cfg.timing.seconds + cfg.timing.warmup_s))
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

    return {"rate_hz": cfg.timing.rate_hz, "seconds": cfg.timing.seconds, "pairs": len(pairs),
            "rt_priority": cfg.timing.rt_priority, "planner_mode":
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
