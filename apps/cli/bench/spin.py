"""``edgerl bench spin``: the bare sleep-then-spin loop, and the edit loop as ratios to it.

Without ``--bundle`` it runs :func:`edgerl.bench.loop.bare_loop.run_bare_loop` (the edit loop's
scheduler with an empty tick) and prints its jitter and misses: the machine's limit for a
fixed-rate Python loop right now. With ``--bundle`` it alternates ``--pairs`` times a bare
block (this process) and an ``edgerl bench loop`` block (a subprocess: the bundle's edit
loop, burn planner beside it) with the same rate, duration, spin and priority, and prints the
edit loop's jitter p99 and miss rate as ratios to the bare loop's
(:func:`edgerl.bench.loop.bare_loop.loop_ratios`; medians over the pairs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from edgerl.apps.cli.errors import CliError

HELP = "bare sleep+spin loop timing (the machine's limit); with --bundle the edit loop as ratios"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rate", type=float, default=1000.0, help="loop rate in Hz (default 1000)")
    p.add_argument("--seconds", type=float, default=5.0, help="measured seconds per block")
    p.add_argument("--warmup", type=float, default=0.5, help="seconds run before measuring")
    p.add_argument("--spin-us", type=float, default=300.0,
                   help="busy-wait this long before each deadline (us; the edit loop's default)")
    p.add_argument("--switch-interval-us", type=float, default=200.0,
                   help="sys.setswitchinterval while running (us); 0 leaves it alone")
    p.add_argument("--spin-switch-interval-us", type=float, default=5000.0,
                   help="--bundle: the edit loop's switch interval inside its spin+tick window "
                        "(us; 0 leaves it alone)")
    p.add_argument("--prewarm-us", type=float, default=150.0,
                   help="--bundle: the edit loop's prewarm budget before the spin (us; 0 = off)")
    p.add_argument("--rt-priority", type=int, default=0,
                   help="SCHED_FIFO priority (1-99) of the loop thread; 0 = normal scheduling")
    p.add_argument("--work-us", type=float, default=0.0,
                   help="bare loop: busy work per tick (us), a stand-in for a tick's compute")
    p.add_argument("--loop-cpus", default="",
                   help="CPUs for both loops' threads, e.g. 1 (default: not pinned)")
    p.add_argument("--planner-cpus", default="",
                   help="--bundle: CPUs for the edit loop's planner (client thread and process)")
    p.add_argument("--bundle", type=Path, default=None,
                   help="also run `edgerl bench loop` on this bundle, interleaved, and report "
                        "ratios to the bare loop")
    p.add_argument("--pairs", type=int, default=1, help="--bundle: (bare, loop) pairs")
    p.add_argument("--planner-latency-ms", type=float, default=70.0,
                   help="--bundle: burn planner CPU time per call (ms)")
    p.add_argument("--planner-period-ms", type=float, default=100.0,
                   help="--bundle: time between planner calls (ms)")
    p.add_argument("--planner-process", action="store_true",
                   help="--bundle: run the planner in a separate process")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def bare(args: argparse.Namespace) -> dict[str, Any]:
    """One bare-loop block with ``args``' settings."""
    from edgerl.bench.loop.bare_loop import BareLoopConfig, run_bare_loop
    from edgerl.runtime.cpu_affinity import parse_cpus

    try:
        cfg = BareLoopConfig(rate_hz=args.rate, seconds=args.seconds, warmup_s=args.warmup,
                             spin_s=args.spin_us * 1e-6, rt_priority=args.rt_priority,
                             switch_interval_s=(args.switch_interval_us * 1e-6
                                                if args.switch_interval_us > 0 else None),
                             work_us=args.work_us, cpus=parse_cpus(args.loop_cpus))
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    return run_bare_loop(cfg)


def edit_loop(args: argparse.Namespace) -> dict[str, Any]:
    """One ``edgerl bench loop --json`` block (subprocess) with the same timing settings."""
    cmd = [sys.executable, "-m", "edgerl.apps", "bench", "loop", "--bundle", str(args.bundle),
           "--rate", f"{args.rate:g}", "--seconds", f"{args.seconds:g}",
           "--warmup", f"{args.warmup:g}", "--spin-us", f"{args.spin_us:g}",
           "--switch-interval-us", f"{args.switch_interval_us:g}",
           "--spin-switch-interval-us", f"{args.spin_switch_interval_us:g}",
           "--prewarm-us", f"{args.prewarm_us:g}",
           "--rt-priority", str(args.rt_priority), "--planner", "burn",
           "--planner-latency-ms", f"{args.planner_latency_ms:g}",
           "--planner-period-ms", f"{args.planner_period_ms:g}",
           "--loop-cpus", args.loop_cpus, "--planner-cpus", args.planner_cpus, "--json"]
    if args.planner_process:
        cmd.append("--planner-process")
    res = subprocess.run(cmd, capture_output=True, text=True,
                         timeout=120 + 2 * (args.seconds + args.warmup))
    if res.returncode != 0:
        tail = (res.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise CliError(f"edgerl bench loop failed (exit {res.returncode}): {tail}")
    return json.loads(res.stdout)


def compare(args: argparse.Namespace) -> dict[str, Any]:
    """``--pairs`` interleaved (bare, loop) blocks; medians and the median ratios, and the
    miss and tick counts of each side summed over the pairs."""
    from edgerl.bench.loop.bare_loop import loop_ratios

    pairs = []
    for _ in range(args.pairs):
        b = bare(args)
        ln = edit_loop(args)
        pairs.append({"bare": b, "loop": ln, **loop_ratios(ln, b)})

    def med(side: str, key: str) -> float:
        return float(statistics.median(float(p[side][key]) for p in pairs))

    def total(side: str, *keys: str) -> int:
        return sum(int(p[side].get(k, 0)) for p in pairs for k in keys)

    return {"rate_hz": args.rate, "seconds": args.seconds, "pairs": len(pairs),
            "rt_priority": args.rt_priority, "planner_mode":
                "process" if args.planner_process else "thread",
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


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_json, print_table

    if not args.seconds > 0 or args.warmup < 0 or args.pairs < 1:
        raise CliError("--seconds must be > 0, --warmup >= 0 and --pairs >= 1")
    if args.bundle is not None and not (args.bundle / "manifest.json").is_file():
        raise CliError(f"--bundle {args.bundle}: no manifest.json (not a bundle)")
    out = bare(args) if args.bundle is None else compare(args)
    if args.json:
        print_json(out)
    else:
        rows = [{"metric": k, "value": v} for k, v in out.items() if k != "blocks"]
        print_table(rows, title=f"bench spin {args.rate:g} Hz")
    return 0
