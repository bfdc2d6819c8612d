"""``edgerl bench serial``: command round-trip over the pty and watchdog safe-entry latency.

Round trips back to back (the default) or, with ``--pace-hz R``, one per tick of an R Hz grid
(``edgerl hil``'s traffic); ``--rt-priority P`` runs as ``edgerl hil --rt-priority P`` does;
``--target qemu-m4`` measures the Cortex-M4 build in QEMU. The measurement and what each
figure means: :mod:`edgerl.bench.serial`.
"""

from __future__ import annotations

import argparse
import sys

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

HELP = "serial link: command round-trip over the pty (p50/p99) and watchdog safe-entry latency"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--count", type=int, default=5000, help="round trips (default 5000)")
    p.add_argument("--warmup", type=int, default=200, help="round trips not counted")
    p.add_argument("--watchdog-trials", type=int, default=10, help="freeze trials")
    p.add_argument("--pace-hz", type=float, default=0.0,
                   help="send one round trip per tick of this grid (Hz), as a control loop "
                        "does (0: back to back, the default)")
    flags.add_firmware_flags(p, watchdog_ms=50)
    flags.add_rt_flags(p, "this process, the firmware one higher, as edgerl hil --rt-priority "
                          "(needs CAP_SYS_NICE); shows the floor on a busy machine", top=98)
    flags.add_output_flags(p, json="one JSON object")


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_result
    from edgerl.bench.serial import SerialBenchConfig, measure_serial

    if args.count < 1 or args.warmup < 0 or args.watchdog_trials < 0:
        raise CliError("--count must be >= 1, --warmup and --watchdog-trials >= 0")
    if not 0 <= args.pace_hz <= 10000:
        raise CliError(f"--pace-hz must be in 0..10000 (0: back to back), got {args.pace_hz}")
    if not 0 <= args.rt_priority <= 98:
        raise CliError(f"--rt-priority must be in 0..98 (the firmware runs one higher), got "
                       f"{args.rt_priority}")
    out = measure_serial(SerialBenchConfig(
        count=args.count, warmup=args.warmup, watchdog_ms=args.watchdog_ms,
        watchdog_trials=args.watchdog_trials, pace_hz=args.pace_hz,
        rt_priority=args.rt_priority, target=args.target,
        show_progress=not args.json and sys.stderr.isatty()))
    print_result(out, as_json=args.json, title="edgerl bench serial")
    return 0
