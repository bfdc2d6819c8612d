"""``edgerl experiment``: run a declared experiment, or list the store's experiments.

``edgerl experiment run experiments/rlif/rlif-region-flip-greedy.toml [--dry-run]`` runs the
config's driver (``--dry-run``: print the commands it would issue, in order, and stop); the
driver writes its results through the results store into the question's ``results/`` folder.
``edgerl experiment list`` prints every experiment: question, name, date, status, driver.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "run a declared experiment (experiments/<question>/<name>.toml) or list the store"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    r = sub.add_parser("run", help="run a config's driver; its results go to the store",
                       description="run a config's driver; its results go to the store")
    r.add_argument("config", type=Path, help="experiments/<question>/<name>.toml")
    r.add_argument("--dry-run", action="store_true",
                   help="print the commands the run would issue, in order, and stop")
    r.add_argument("--results", type=Path, default=None,
                   help="results file to write (default experiments/<question>/results/"
                        "<name>.json)")
    r.add_argument("--force", action="store_true", help="replace an existing results file")
    r.add_argument("--lane", type=int, default=None, metavar="SEED",
                   help=argparse.SUPPRESS)  # one seed's process of a parallel run
    ls = sub.add_parser("list", help="every experiment of the store",
                        description="every experiment of the store")
    ls.add_argument("--store", type=Path, default=Path("experiments"),
                    help="the store's folder (default experiments)")
    ls.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_json, print_table

    if args.action == "list":
        from edgerl.apps.experiments.store import load_store

        store = load_store(args.store)
        rows = [{"question": e.question, "name": e.name, "date": e.date, "status": e.status,
                 "driver": e.driver or "-", "results": len(store.results_of(e.name))}
                for e in store.experiments]
        if args.json:
            print_json(rows)
        else:
            print_table(rows, title=f"{len(rows)} experiments")
        return 0
    from edgerl.apps.experiments.runner import dry_run_lines, run_experiment

    if args.dry_run:
        for line in dry_run_lines(args.config):
            print(line)
        return 0
    argv = ["experiment", "run", str(args.config)]
    argv += ["--results", str(args.results)] if args.results else []
    argv += ["--force"] if args.force else []
    argv += ["--lane", str(args.lane)] if args.lane is not None else []
    written = run_experiment(args.config, lane=args.lane, results=args.results,
                             force=args.force, argv=argv)
    for path in written:
        print(path)
    return 0
