"""``edgerl bench spin``: the bare sleep-then-spin loop, and the edit loop as ratios to it.

Without ``--bundle`` it runs one bare block (:func:`edgerl.bench.loop.spin.bare`: the edit
loop's scheduler with an empty tick) and prints its jitter and misses: the machine's limit
for a fixed-rate Python loop right now. With ``--bundle`` it alternates ``--pairs`` times a
bare block and an ``edgerl bench loop`` block with the same rate, duration, spin and
priority, and prints the edit loop's jitter p99 and miss rate as ratios to the bare loop's
(:func:`edgerl.bench.loop.spin.compare`; medians over the pairs).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

if TYPE_CHECKING:
    from edgerl.bench.loop.spin import SpinConfig

HELP = "bare sleep+spin loop timing (the machine's limit); with --bundle the edit loop as ratios"


def add_arguments(p: argparse.ArgumentParser) -> None:
    flags.add_loop_flags(p, rate=1000.0, seconds=5.0, seconds_help="measured seconds per block",
                         warmup=0.5, edit_scope="--bundle: ")
    p.add_argument("--work-us", type=float, default=0.0,
                   help="bare loop: busy work per tick (us), a stand-in for a tick's compute")
    flags.add_rt_flags(p, "the loop thread", loop_cpus="both loops' threads",
                       planner_cpus="the edit loop's planner (client thread and process)",
                       planner_scope="--bundle: ")
    flags.add_bundle_flags(p, help="also run `edgerl bench loop` on this bundle, interleaved, and "
                                   "report ratios to the bare loop")
    p.add_argument("--pairs", type=int, default=1, help="--bundle: (bare, loop) pairs")
    flags.add_planner_flags(p, scope="--bundle: ", period_ms=100.0)
    flags.add_output_flags(p)


def config(args: argparse.Namespace) -> SpinConfig:
    """The :class:`~edgerl.bench.loop.spin.SpinConfig` of the parsed flags."""
    from edgerl.bench.loop.spin import SpinConfig

    return SpinConfig(bundle=args.bundle, pairs=args.pairs, loop_cpus=args.loop_cpus,
                      planner_cpus=args.planner_cpus, timing=flags.loop_timing(args),
                      work_us=args.work_us, planner_latency_ms=args.planner_latency_ms,
                      planner_period_ms=args.planner_period_ms,
                      planner_process=args.planner_process)


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_result
    from edgerl.bench.loop.spin import bare, compare

    if not args.seconds > 0 or args.warmup < 0 or args.pairs < 1:
        raise CliError("--seconds must be > 0, --warmup >= 0 and --pairs >= 1")
    if args.bundle is not None and not (args.bundle / "manifest.json").is_file():
        raise CliError(f"--bundle {args.bundle}: no manifest.json (not a bundle)")
    cfg = config(args)
    out = bare(cfg) if args.bundle is None else compare(cfg)
    rows = [{"metric": k, "value": v} for k, v in out.items() if k != "blocks"]
    print_result(out, as_json=args.json, title=f"bench spin {args.rate:g} Hz", rows=rows)
    return 0
