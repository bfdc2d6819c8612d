"""``edgerl bench train``: PPO env-steps/s of edgerl's trainer as a ratio to rsl-rl-lib's bare
``OnPolicyRunner`` on the same task, env count, rollout and networks, measured interleaved in
the same run (:mod:`edgerl.bench.train.throughput`)."""

from __future__ import annotations

import argparse

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

HELP = "PPO training throughput: edgerl's trainer vs rsl-rl-lib's bare OnPolicyRunner (ratio)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tasks", default="cartpole,ball_balance",
                   help="comma-separated registered tasks (default cartpole,ball_balance)")
    flags.add_episode_flags(p, num_envs=(64, "parallel envs (default 64)"))
    p.add_argument("--steps-per-env", type=int, default=32,
                   help="rollout steps per env per iteration (default 32)")
    p.add_argument("--iterations", type=int, default=3,
                   help="PPO iterations per timed block (default 3)")
    p.add_argument("--repeats", type=int, default=3,
                   help="interleaved (ours, bare) pairs; medians reported (default 3)")
    p.add_argument("--method", default="nodelay", help="our trainer's method (default nodelay)")
    flags.add_compute_flags(p, device=("cpu", "torch device (default cpu)"),
                            threads=(1, "torch CPU threads (default 1)"))
    flags.add_output_flags(p, json="a JSON list of rows")


def run(args: argparse.Namespace) -> int:
    import torch

    from edgerl.apps.cli.output import print_result
    from edgerl.apps.cli.train import check_device
    from edgerl.bench.train.throughput import ThroughputCfg, compare_tasks
    from edgerl.sim.registry import get_task_info

    tasks = [t for t in args.tasks.split(",") if t]
    if not tasks:
        raise CliError("--tasks: give at least one task")
    for task in tasks:
        try:
            get_task_info(task)
        except KeyError as exc:
            raise CliError(exc.args[0]) from exc
    check_device(args.device)
    torch.set_num_threads(max(1, args.threads))
    try:
        base = ThroughputCfg(task=tasks[0], num_envs=args.num_envs,
                             steps_per_env=args.steps_per_env, iterations=args.iterations,
                             repeats=args.repeats, method=args.method, device=args.device)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    rows = compare_tasks(tasks, base)
    print_result(rows, as_json=args.json,
                 rows=[{k: v for k, v in r.items() if k != "pairs"} for r in rows],
                 title="edgerl bench train: our trainer / rsl-rl-lib OnPolicyRunner")
    return 0
