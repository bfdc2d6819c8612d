"""``edgerl bench all``: the headline benchmarks of docs/benchmarks.md in one run (``make
bench``).

Builds the benchmark bundle once under ``--out`` (default ``runs/bench``), runs ``edgerl
bench ratios`` (history line and trend PNG), then each ``edgerl bench`` target, and prints
one summary table; the raw JSON of every target goes to ``OUT/results.json``
(:mod:`edgerl.bench.suite`). ``--dry-run`` prints the commands it would run instead.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

HELP = "every headline benchmark (make bench): ratios, then each target; one summary table"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quick", action="store_true", help="short runs (smoke check)")
    p.add_argument("--ratios-only", action="store_true",
                   help="only `edgerl bench ratios` (skip the absolute figures)")
    p.add_argument("--out", type=Path, default=Path("runs/bench"),
                   help="where the bundle is built and results.json written (default "
                        "runs/bench)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the edgerl commands, one a line, and run nothing")


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_table
    from edgerl.bench.suite import SuiteConfig, plan, run_suite

    cfg = SuiteConfig(quick=args.quick, ratios_only=args.ratios_only, out=args.out)
    if args.dry_run:
        for argv in plan(cfg):
            print(shlex.join(["edgerl", *argv]))
        return 0
    rows = run_suite(cfg)
    if rows:
        print_table(rows, title=f"edgerl benchmarks (raw JSON: {cfg.out / 'results.json'})")
    return 0
