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


def evaluate_run(run_dir: str, episodes: int, num_envs: int = 0, seed: int | None = None,
                 checkpoint: str | None = None, device: str = "cpu",
                 show_progress: bool = True) -> dict:
    """Load ``run_dir`` and evaluate it; the dict ``edgerl eval --json`` prints."""
    from edgerl.policies.evaluate import evaluate
    from edgerl.policies.runs import load_policy

    pol = load_policy(run_dir, device=device, checkpoint=checkpoint)
    cfg = pol.config
    n = num_envs or min(episodes, 256)
    seed = cfg.seed + 1000 if seed is None else seed
    env = pol.make_env(n, seed=seed)
    try:
        result = evaluate(env, pol.act, episodes, show_progress=show_progress)
    finally:
        env.close()
    return {**result.summary(), "method": cfg.method, "task": cfg.task,
            "delay_steps": cfg.delay_steps, "delay_ms": pol.document["resolved"]["delay_ms"],
            "seed": cfg.seed, "eval_seed": seed, "planner": cfg.planner,
            "checkpoint": None if pol.checkpoint is None else pol.checkpoint.name,
            "run": str(pol.run_dir)}


def run(args: argparse.Namespace) -> int:
    import torch

    from edgerl.cli import CliError
    from edgerl.cli.output import print_json, print_table
    from edgerl.policies.runs import RunError

    torch.set_num_threads(max(1, args.threads))
    if args.episodes < 1:
        raise CliError(f"--episodes must be >= 1, got {args.episodes}")
    try:
        out = evaluate_run(args.run, args.episodes, args.num_envs, args.seed, args.checkpoint,
                           args.device, show_progress=not args.no_progress)
    except RunError as exc:
        raise CliError(str(exc)) from exc
    if args.json:
        print_json(out)
    else:
        print_table([{"key": k, "value": v} for k, v in out.items()], title="edgerl eval")
    return 0
