"""``edgerl tasks``: list the registered simulation tasks."""

from __future__ import annotations

import argparse

from edgerl.apps.cli import flags

HELP = "list the simulation tasks (backend, observation/action sizes, control rate)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    flags.add_output_flags(p, json="a JSON list for machines")


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_json, print_table
    from edgerl.sim.registry import list_tasks

    rows = [info.summary() for info in list_tasks()]
    if args.json:
        print_json(rows)
    else:
        print_table(rows, title="edgerl tasks")
    return 0
