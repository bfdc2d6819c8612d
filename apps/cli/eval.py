"""``edgerl eval``: success rate and return of a trained run over N episodes."""

from __future__ import annotations

import argparse

HELP = "evaluate a training run (success rate, return) on its own latency wrappers"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run directory written by `edgerl train`")
    p.add_argument("--episodes", type=int, default=100, help="episodes (default 100)")
    p.add_argument("--num-envs", type=int, default=0,
                   help="parallel envs (default min(episodes, 256))")
    p.add_argument("--seed", type=int, default=None,
                   help="eval seed (default: the run's seed + 1000, unseen in training)")
    p.add_argument("--checkpoint", default=None,
                   help="checkpoint to load (default model_best.pt, the best training success "
                        "rate; else the newest model_*.pt)")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: small MLPs run fastest single-threaded)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    import torch

    from edgerl.apps.cli.errors import CliError
    from edgerl.apps.cli.output import print_result
    from edgerl.policies.evaluate import evaluate_run
    from edgerl.policies.runs import RunError

    torch.set_num_threads(max(1, args.threads))
    if args.episodes < 1:
        raise CliError(f"--episodes must be >= 1, got {args.episodes}")
    try:
        out = evaluate_run(args.run, args.episodes, args.num_envs, args.seed, args.checkpoint,
                           args.device, show_progress=not args.no_progress)
    except RunError as exc:
        raise CliError(str(exc)) from exc
    print_result(out, as_json=args.json, key="key", title="edgerl eval")
    return 0
