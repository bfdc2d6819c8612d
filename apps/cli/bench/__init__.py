"""``edgerl bench TARGET``: measurements quoted in the README and docs/benchmarks.md.

Each target lives in its own module (listed in :data:`BENCHES`) with ``HELP``,
``add_arguments`` and ``run``, like the top-level verbs: it parses its flags, calls the
measuring code in :mod:`edgerl.bench` and prints the result. ``all`` runs the headline set
(``make bench``).
"""

from __future__ import annotations

import argparse

from edgerl.apps.cli.registry import add_module_parsers

HELP = "run a benchmark (sim, loop, planner, ...) and print its numbers (--json for machines)"

#: target -> module implementing it.
BENCHES: dict[str, str] = {
    "sim": "edgerl.apps.cli.bench.sim",
    "planner": "edgerl.apps.cli.bench.planner",
    "loop": "edgerl.apps.cli.bench.loop",
    "serial": "edgerl.apps.cli.bench.serial",
    "spin": "edgerl.apps.cli.bench.spin",
    "train": "edgerl.apps.cli.bench.train",
    "ratios": "edgerl.apps.cli.bench.ratios",
    "all": "edgerl.apps.cli.bench.suite",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_module_parsers(p, BENCHES, dest="target", metavar="TARGET", run_attr="_bench_run")


def run(args: argparse.Namespace) -> int:
    return int(args._bench_run(args) or 0)
