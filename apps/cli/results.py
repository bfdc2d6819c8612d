"""``edgerl results``: run the methods x delays x seeds grid and write docs/results.*."""

from __future__ import annotations

import argparse
import shlex
import sys

HELP = "run the results grid (tasks x delays x methods x seeds) and write docs/results.md"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _key(row: dict) -> tuple:
    return (row["task"], row["delay_steps"], row["method"], row["seed"])


def add_arguments(p: argparse.ArgumentParser) -> None:
    from edgerl.policies.results import GRID_METHODS

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
    p.add_argument("--json-out", default="docs/results.json")
    p.add_argument("--md-out", default="docs/results.md")
    p.add_argument("--png-out", default="docs/learning_curves.png")
    p.add_argument("--no-resume", action="store_true",
                   help="rerun cells already present in the JSON file")
    p.add_argument("--report-only", action="store_true",
                   help="only rewrite the markdown and PNG from the JSON file")
    p.add_argument("--merge", default="",
                   help="comma-separated results JSON files (e.g. from parallel grid processes) "
                        "merged into --json-out first; later files win on the same cell")
    p.add_argument("--reproduce", default="",
                   help="the reproduce command(s) written into the markdown (default: this one)")
    p.add_argument("--notes", default="",
                   help="a markdown file whose text is appended to the report")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    p.add_argument("--json", action="store_true", help="print the acceptance checks as JSON")


def run(args: argparse.Namespace) -> int:
    import logging

    import torch

    from edgerl.apps.cli.errors import CliError
    from edgerl.apps.cli.output import print_json, print_table
    from edgerl.apps.cli.train import parse_task_args
    from edgerl.contract.logs import progress
    from edgerl.contract.methods import METHODS
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
    rows = load_rows(args.json_out)
    for extra in [f for f in args.merge.split(",") if f]:
        new = load_rows(extra)
        keys = {_key(r) for r in new}
        rows = [r for r in rows if _key(r) not in keys] + new
    if args.merge:
        save_rows(args.json_out, rows)
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
            rows = [r for r in rows if _key(r) != cell.key()] + [row]
            save_rows(args.json_out, rows)
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
