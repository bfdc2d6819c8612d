"""``edgerl results``: run the methods x delays x seeds grid into the results store; ``edgerl
results docs``: regenerate docs/results.md, docs/benchmarks.md and the README's result tables
from the store (``--check``: fail instead when they differ from what the store says)."""

from __future__ import annotations

import argparse
import shlex
import sys

HELP = ("run the results grid (tasks x delays x methods x seeds) into the results store; "
        "'edgerl results docs' regenerates the results docs from the store")
GRID_JSON = "experiments/planner-matters/results/planner-matters-grid.json"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _key(row: dict) -> tuple:
    return (row["task"], row["delay_steps"], row["method"], row["seed"])


def add_arguments(p: argparse.ArgumentParser) -> None:
    from edgerl.policies.results import GRID_METHODS

    sub = p.add_subparsers(dest="action", metavar="[docs]")
    d = sub.add_parser("docs", help="regenerate docs/results.md, docs/benchmarks.md and the "
                                    "README's result tables from the experiment store",
                       description="regenerate docs/results.md, docs/benchmarks.md and the "
                                   "README's result tables from the experiment store")
    d.add_argument("--store", default="experiments", help="the store (default experiments)")
    d.add_argument("--root", default=".", help="the checkout whose docs are written")
    d.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if a generated file differs from the store's")
    p.add_argument("--tasks", default="cartpole_goal,ball_goal,driving",
                   help="comma-separated tasks (default cartpole_goal,ball_goal,driving: the "
                        "goal or route is known to the planner only)")
    p.add_argument("--methods", default=",".join(GRID_METHODS),
                   help="comma-separated methods (default: edit and every control)")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    p.add_argument("--delays", default="",
                   help="comma-separated delays in steps for every task (default: 0, small and "
                        "the first >= --large-ms at each task's rate)")
    p.add_argument("--large-ms", type=float, default=200.0,
                   help="the largest default delay, in ms (default 200)")
    p.add_argument("--iterations", type=int, default=0,
                   help="PPO iterations for every task (default: per-task preset)")
    p.add_argument("--num-envs", type=int, default=0, help="envs (default: per-task preset)")
    p.add_argument("--episodes", type=int, default=100, help="eval episodes per cell")
    p.add_argument("--task-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="extra task factory argument for every task (repeatable; VALUE parsed "
                        "as JSON when it can be), e.g. expert_run=RUN for a gym task")
    p.add_argument("--planner", default="", choices=("", "expert", "bc"),
                   help="chunk planner for every task (default: each task's preset)")
    p.add_argument("--root", default="runs/grid", help="where the grid's runs go")
    p.add_argument("--json-out", default=GRID_JSON,
                   help=f"the grid's results file in the store (default {GRID_JSON})")
    p.add_argument("--md-out", default="runs/grid/report.md",
                   help="the grid's own markdown report (default runs/grid/report.md; "
                        "docs/results.md is 'edgerl results docs')")
    p.add_argument("--png-out", default="runs/grid/learning_curves.png")
    p.add_argument("--no-resume", action="store_true",
                   help="rerun cells already present in the JSON file")
    p.add_argument("--report-only", action="store_true",
                   help="only rewrite the markdown and PNG from the JSON file")
    p.add_argument("--merge", default="",
                   help="comma-separated results files (e.g. from parallel grid processes) "
                        "merged into --json-out first; later files win on the same cell")
    p.add_argument("--reproduce", default="",
                   help="the reproduce command(s) written into the markdown (default: this one)")
    p.add_argument("--notes", default="",
                   help="a markdown file whose text is appended to the report")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--json", action="store_true", help="print the acceptance checks as JSON")


def run(args: argparse.Namespace) -> int:
    if args.action == "docs":
        return _docs(args)
    return _grid(args)


def _docs(args: argparse.Namespace) -> int:
    from pathlib import Path

    from edgerl.apps.experiments.report.docs import generate, write_or_check

    changed = write_or_check(generate(Path(args.store), Path(args.root)), Path(args.root),
                             check=args.check)
    for path in changed:
        print(f"{'differs' if args.check else 'wrote'}: {path}")
    return 1 if args.check and changed else 0


def _grid(args: argparse.Namespace) -> int:
    import logging

    import torch

    from edgerl.apps.cli.errors import CliError
    from edgerl.apps.cli.output import print_json, print_table
    from edgerl.apps.cli.train import parse_task_args
    from edgerl.contract.logs import progress
    from edgerl.contract.methods import METHODS
    from edgerl.contract.results_store import Provenance, ResultsFormatError
    from edgerl.policies.results import (
        GridConfig,
        acceptance,
        grid_cells,
        load_rows,
        run_cell,
        save_rows,
        write_learning_curves,
        write_markdown,
    )
    from edgerl.sim.registry import get_task_info

    torch.set_num_threads(max(1, args.threads))
    log = logging.getLogger("edgerl.results")
    tasks = [t for t in args.tasks.split(",") if t]
    methods = [m for m in args.methods.split(",") if m]
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise CliError(f"unknown method {bad[0]!r}; choose from {', '.join(METHODS)}")
    hz = {}
    for t in tasks:
        try:
            hz[t] = get_task_info(t).control_hz
        except KeyError as exc:
            raise CliError(exc.args[0]) from exc
    task_kwargs = parse_task_args(args.task_arg)
    overrides = {}
    for t in tasks:
        o: dict = {"task_kwargs": task_kwargs} if task_kwargs else {}
        if args.iterations:
            o["iterations"] = args.iterations
        if args.num_envs:
            o["num_envs"] = args.num_envs
        overrides[t] = o
    delays = {t: _ints(args.delays) for t in tasks} if args.delays else {}
    grid = GridConfig(tasks=tasks, seeds=_ints(args.seeds), methods=methods, delays=delays,
                      episodes=args.episodes, planner=args.planner, overrides=overrides,
                      large_ms=args.large_ms)
    config = {"tasks": tasks, "methods": methods, "seeds": grid.seeds, "delays": delays,
              "episodes": grid.episodes, "planner": grid.planner, "overrides": overrides,
              "large_ms": grid.large_ms}
    prov = Provenance.now()
    try:
        rows = load_rows(args.json_out)
        for extra in [f for f in args.merge.split(",") if f]:
            new = load_rows(extra)
            keys = {_key(r) for r in new}
            rows = [r for r in rows if _key(r) not in keys] + new
    except ResultsFormatError as exc:
        raise CliError(str(exc)) from exc
    if args.merge:
        save_rows(args.json_out, rows, config=config, provenance=prov)
    if not args.report_only:
        done = set() if args.no_resume else {_key(r) for r in rows}
        todo = [c for c in grid_cells(grid, hz) if c.key() not in done]
        log.info("results grid: %d cells to run (%d already done)", len(todo), len(rows))
        for cell in progress(todo, total=len(todo), desc="grid"):
            try:
                row = run_cell(cell, grid, args.root)
            except Exception:
                log.exception("cell %s failed; continuing", cell)
                continue
            row["_provenance"] = Provenance.now().to_dict()  # the run that made this cell
            rows = [r for r in rows if _key(r) != cell.key()] + [row]
            save_rows(args.json_out, rows, config=config, provenance=prov)
            log.info("%s: success %.2f return %.1f", cell, row["success_rate"],
                     row["return_mean"])
    command = args.reproduce or ("edgerl " + " ".join(shlex.quote(a) for a in sys.argv[1:]))
    notes = ""
    if args.notes:
        try:
            with open(args.notes) as fh:
                notes = fh.read()
        except OSError as exc:
            raise CliError(f"--notes {args.notes}: {exc}") from exc
    write_markdown(rows, args.md_out, command=command, notes=notes)
    write_learning_curves(rows, args.png_out)
    checks = acceptance(rows)
    if args.json:
        print_json(checks)
    else:
        print_table(checks or [{"acceptance": "no edit cell with D >= 200 ms yet"}],
                    title="does the planner matter? (edit vs its controls)")
    return 0
