"""``edgerl bench loop``: edit-loop timing at a fixed rate while a planner runs beside it.

Parses the flags into an :class:`~edgerl.bench.loop.edit_loop.EditLoopBenchConfig`, runs
:func:`~edgerl.bench.loop.edit_loop.measure_edit_loop` (observation source ``--sensor``, the
planner beside the loop, warm-up, then ``--seconds`` measured) and prints the summary
(``--json`` for machines); ``--save-json`` writes the histograms, ``--png`` a latency PNG.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

if TYPE_CHECKING:
    from edgerl.bench.loop.edit_loop import EditLoopBenchConfig

HELP = "edit-loop timing (tick compute, wake-up jitter, deadline misses) beside a planner"


def add_arguments(p: argparse.ArgumentParser) -> None:
    flags.add_bundle_flags(p, required=True, backend=True)
    flags.add_loop_flags(p, rate=None, seconds=10.0, seconds_help="measured duration (s)",
                         warmup=1.0)
    flags.add_planner_flags(p, choice=True)
    flags.add_rt_flags(p, "the loop thread", loop_cpus="the loop thread",
                       planner_cpus="the planner client thread and the planner process it spawns",
                       planner_note="; keep them off --loop-cpus")
    p.add_argument("--no-gc-freeze", action="store_true", help="do not gc.freeze() at start")
    sensor = p.add_argument_group("observations")
    sensor.add_argument("--sensor", choices=("sink", "thread"), default="sink",
                        help="observation source: written by the command sink each tick "
                             "(default), or by a separate thread at --sensor-hz")
    sensor.add_argument("--sensor-hz", type=float, default=500.0,
                        help="--sensor thread: observation rate (Hz)")
    sensor.add_argument("--trigger", choices=("clock", "state"), default="clock",
                        help="tick on the loop's own clock (default) or on each observation "
                             "(needs --sensor thread; ticks at --sensor-hz)")
    flags.add_output_flags(p, png="write a latency histogram PNG",
                           save_json="write summary + histograms to this file")


def config(args: argparse.Namespace) -> EditLoopBenchConfig:
    """The :class:`~edgerl.bench.loop.edit_loop.EditLoopBenchConfig` of the parsed flags
    (``CliError`` for values that cannot work together)."""
    from edgerl.bench.loop.edit_loop import EditLoopBenchConfig
    from edgerl.runtime.cpu_affinity import cpu_list

    if not args.seconds > 0 or args.warmup < 0:
        raise CliError("--seconds must be > 0 and --warmup >= 0")
    if args.trigger == "state" and args.sensor != "thread":
        raise CliError("--trigger state needs --sensor thread (a sink-written observation "
                       "would trigger the next tick at once)")
    try:
        loop_cpus = cpu_list(args.loop_cpus, "--loop-cpus")
        planner_cpus = cpu_list(args.planner_cpus, "--planner-cpus")
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    return EditLoopBenchConfig(
        bundle=args.bundle, timing=flags.loop_timing(args), planner=args.planner,
        planner_process=args.planner_process, planner_latency_ms=args.planner_latency_ms,
        planner_period_ms=args.planner_period_ms, planner_gil=args.planner_gil,
        backend=args.backend, device=args.device, loop_cpus=loop_cpus,
        planner_cpus=planner_cpus, gc_freeze=not args.no_gc_freeze, sensor=args.sensor,
        sensor_hz=args.sensor_hz, trigger=args.trigger, save_json=args.save_json, png=args.png)


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_result
    from edgerl.bench.loop.edit_loop import KEYS, measure_edit_loop

    out = measure_edit_loop(config(args))
    rows = [{"metric": k, "value": out[k]}
            for k in (*KEYS, "deadline_miss_pct", "tick_compute_max_us", "planner_latency_p50_ms")]
    print_result(out, as_json=args.json, rows=rows,
                 title=f"bench loop {out['rate_hz']:g} Hz, {out['method']}, planner "
                       f"{out['planner']}/{out['planner_mode']}")
    return 0
