"""``edgerl eval``: success rate and return of a trained run over N episodes."""

from __future__ import annotations

import argparse

from edgerl.apps.cli import flags

HELP = "evaluate a training run (success rate, return) on its own latency wrappers"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", help="run directory written by `edgerl train`")
    p.add_argument("--checkpoint", default=None,
                   help="checkpoint to load (default model_best.pt, the best training success "
                        "rate; else the newest model_*.pt)")
    flags.add_episode_flags(p, episodes=(100, "episodes (default 100)"),
                            num_envs=(0, "parallel envs (default min(episodes, 256))"),
                            seed=(None, "eval seed (default: the run's seed + 1000, unseen in "
                                        "training)"))
    flags.add_compute_flags(p, device=("cpu", "torch device (default cpu)"),
                            threads=(1, "torch CPU threads (default 1: small MLPs run fastest "
                                        "single-threaded)"))
    out = flags.add_output_flags(p, json="one JSON object")
    out.add_argument("--no-progress", action="store_true", help="hide the progress bar")


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
