"""``edgerl bench TARGET``: measurements quoted in the README and docs/benchmarks.md.

Each target lives in its own module (listed in :data:`BENCHES`) with ``HELP``,
``add_arguments`` and ``run``, like the top-level verbs.
"""

from __future__ import annotations

import argparse
import importlib

HELP = "run a benchmark (sim, loop, planner, ...) and print its numbers (--json for machines)"

#: target -> module implementing it.
BENCHES: dict[str, str] = {
    "sim": "edgerl.bench.sim.throughput",
    "planner": "edgerl.apps.cli.bench.planner",
    "loop": "edgerl.apps.cli.bench.loop",
    "serial": "edgerl.apps.cli.bench.serial",
    "spin": "edgerl.apps.cli.bench.spin",
    "train": "edgerl.apps.cli.bench.train",
    "ratios": "edgerl.apps.cli.bench.ratios",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="target", metavar="TARGET", required=True)
    for target, module_name in BENCHES.items():
        module = importlib.import_module(module_name)
        q = sub.add_parser(target, help=module.HELP, description=module.HELP)
        module.add_arguments(q)
        q.set_defaults(_bench_run=module.run)


def run(args: argparse.Namespace) -> int:
    return int(args._bench_run(args) or 0)
