"""``edgerl bench sim``: env-steps/s of a task next to its raw physics backend.

Parses the flags, sets torch's threads, checks the device and prints what
:func:`edgerl.bench.sim.throughput.measure` returns (``steps_per_s`` through the whole task,
``raw_physics_steps_per_s`` of its backend in the same run, their ratio; ``--json`` for
machines).
"""

from __future__ import annotations

import argparse

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

HELP = "simulation throughput: env-steps/s of a task vs its raw physics backend"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", required=True, help="registered task name (see `edgerl tasks`)")
    flags.add_episode_flags(p, num_envs=(1024, "parallel envs (default 1024)"), seed=(0, "seed"))
    flags.add_compute_flags(p, threads=(0, "torch intra-op threads (0 = torch's default)"),
                            device=("cpu", "torch device: cpu or cuda (default cpu)"))
    p.add_argument("--steps", type=int, default=200, help="timed control steps (default 200)")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps first (default 10)")
    p.add_argument("--repeats", type=int, default=3,
                   help="timed blocks of --steps steps; the best is reported (default 3)")
    p.add_argument("--method", default="",
                   help="also wrap in the latency wrapper with this method (expert planner)")
    p.add_argument("--actions", choices=("zero", "expert"), default="zero",
                   help="zero actions, or the task's expert every step (default zero)")
    flags.add_output_flags(p, json="one JSON object")


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_result
    from edgerl.bench.sim.throughput import measure

    if args.num_envs < 1 or args.steps < 1 or args.warmup < 0 or args.repeats < 1:
        raise CliError("--num-envs, --steps and --repeats must be >= 1, --warmup >= 0")
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise CliError("--device cuda: no CUDA device is available")
    try:
        result = measure(args.task, args.num_envs, args.device, args.steps, args.warmup,
                         args.method, args.seed, show_progress=not args.json,
                         actions=args.actions, repeats=args.repeats)
    except KeyError as exc:
        raise CliError(str(exc.args[0])) from None
    except NotImplementedError as exc:
        raise CliError(str(exc)) from None
    print_result(result, as_json=args.json, title=f"edgerl bench sim: {args.task}")
    return 0
