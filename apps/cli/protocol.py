"""``edgerl protocol TASK``: does the planner matter on a task? Every control, several seeds.

Trains and evaluates the privileged ``nodelay`` upper bound (on a foreign task also the expert
the planner learns from), ``edit``, ``edit_zero_chunks`` and the planner alone at the delay
(and without it), with one configuration for every method (:mod:`edgerl.policies.protocol`),
then prints per cell the score and the command's mean |du| per tick (mean +- SE over seeds)
and the normalized planner gain ``g`` and ``edit - planner``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HELP = "run the new-task protocol (every control, several seeds) and print the planner gain"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help="registered task name (gym:<EnvId>, dmc:<domain>-<task>, ...)")
    p.add_argument("--planner-only", default="", metavar="NAMES",
                   help="comma-separated observation elements, indices or keys only the "
                        "planner sees (the goal, the target); default: the task's own split")
    p.add_argument("--delay-ms", type=float, default=200.0,
                   help="planner delay in ms, rounded up to whole control steps (default 200)")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    p.add_argument("--iterations", type=int, default=300,
                   help="PPO iterations of the edit policies (default 300)")
    p.add_argument("--expert-iterations", type=int, default=0,
                   help="PPO iterations of the privileged nodelay cell (default: the edit's "
                        "budget, warm start included)")
    p.add_argument("--num-envs", type=int, default=32, help="parallel envs (default 32)")
    p.add_argument("--episodes", type=int, default=50,
                   help="evaluation episodes per cell, on unseen seeds (default 50)")
    p.add_argument("--planner", default="bc", choices=("bc", "expert"),
                   help="bc: a planner behaviour-cloned from the expert (default); expert: "
                        "the task's scripted expert plans")
    p.add_argument("--expert-run", default="",
                   help="an existing nodelay run to use as the expert and upper bound")
    p.add_argument("--metric", default="return_mean", choices=("return_mean", "success_rate"),
                   help="the score the summary compares (default return_mean)")
    p.add_argument("--task-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="extra task factory argument (repeatable; VALUE parsed as JSON)")
    p.add_argument("--extra-cells", default="", metavar="CELLS",
                   help="comma-separated extra cells: rtc, blend, edit_prefix (the edit over a "
                        "planner that reads the committed prefix)")
    p.add_argument("--jobs", type=int, default=1, help="cells trained at once (default 1)")
    p.add_argument("--out", required=True, help="folder for the runs and protocol.json")
    p.add_argument("--record", default="", metavar="STORE",
                   help="also write the rows, with provenance, into this results store "
                        "(experiments/) as the results of --experiment")
    p.add_argument("--experiment", default="",
                   help="the experiment's name in the store (default planner-gain-<task>)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def _items(text: str) -> list:
    out: list = []
    for item in (x.strip() for x in text.split(",") if x.strip()):
        out.append(int(item) if item.lstrip("-").isdigit() else item)
    return out


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.errors import CliError
    from edgerl.apps.cli.train import parse_task_args
    from edgerl.contract.report import print_json, print_table
    from edgerl.policies.protocol import (
        ProtocolConfig,
        has_headroom,
        record,
        run_protocol,
        summarize,
        write_rows,
    )

    try:
        cfg = ProtocolConfig(task=args.task, planner_only=_items(args.planner_only),
                             delay_ms=args.delay_ms, seeds=tuple(_items(args.seeds)),
                             iterations=args.iterations,
                             expert_iterations=args.expert_iterations, num_envs=args.num_envs,
                             episodes=args.episodes, planner=args.planner,
                             expert_run=args.expert_run, jobs=args.jobs,
                             extra_cells=tuple(_items(args.extra_cells)),
                             task_kwargs=parse_task_args(args.task_arg))
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    out = Path(args.out)

    def progress(row: dict) -> None:
        print(f"  {row['cell']:<22} seed {row['seed']}: {args.metric} "
              f"{row[args.metric]:.3f}, |du| {row['action_rate']:.3f}", file=sys.stderr)

    from edgerl.contract.results_store import relative_command

    command = relative_command(["edgerl", *sys.argv[1:]], Path.cwd())
    rows = run_protocol(cfg, out, on_row=progress, command=command)
    write_rows(out / "protocol.json", cfg, rows)
    if args.record:
        name = args.experiment or "planner-gain-" + "-".join(
            "".join(c if c.isalnum() else " " for c in args.task.lower()).split())
        print(f"recorded: {record(args.record, name, cfg, rows)}", file=sys.stderr)
    summary = summarize(rows, args.metric)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    if args.json:
        print_json(summary)
        return 0
    table = [{"cell": name, args.metric: f"{c['mean']:.3f} +- {c['se']:.3f}",
              "mean |du| per tick": f"{c['action_rate']:.3f}", "seeds": c["n"]}
             for name, c in summary["cells"].items()]
    print_table(table, title=f"edgerl protocol: {args.task}, planner delay {args.delay_ms:g} ms")
    g, m = summary["g"], summary["edit_minus_planner"]
    print(f"planner gain g = {g['mean']:.2f} +- {g['se']:.2f}; edit - planner = "
          f"{m['mean']:.3f} +- {m['se']:.3f} (mean +- SE over {len(summary['seeds'])} seeds)")
    if not has_headroom(summary):
        room = summary["headroom"]
        print(f"the privileged nodelay policy does not beat the zero-chunk control "
              f"(nodelay - zero = {room['mean']:.3f} +- {room['se']:.3f}): g is not defined "
              "here; give the expert more iterations (--expert-iterations) or check the split")
    return 0
