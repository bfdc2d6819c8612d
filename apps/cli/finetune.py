"""``edgerl finetune``: fine-tune a bundle's edit policy on recorded operator interventions
(RLIF: the intervention is the reward; or the BC baseline) and export a new bundle."""

from __future__ import annotations

import argparse
from pathlib import Path

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

HELP = ("fine-tune a bundle's edit policy off-policy on recorded operator interventions "
        "(RLIF, or the BC baseline) and export a new bundle")


def add_arguments(p: argparse.ArgumentParser) -> None:
    flags.add_bundle_flags(p, required=True,
                           help="the starting bundle (an edit policy with policy_mlp.npz)")
    p.add_argument("--interventions", type=Path, nargs="+", required=True, metavar="FILE",
                   help="MCAP recordings from `edgerl hil --record` or `edgerl deploy "
                        "--record-transitions` (loop ticks + operator interventions)")
    g = p.add_argument_group("fine-tuning")
    g.add_argument("--method", choices=("rlif", "bc"), default="rlif",
                   help="rlif: IQL critic with reward -1 at each takeover + advantage-weighted "
                        "policy update (default); bc: regress on the operator's commands")
    g.add_argument("--steps", type=int, default=2000, help="gradient steps (default 2000)")
    _rlif_flags(g)
    flags.add_episode_flags(p, seed=(0, "seed (default 0)"))
    flags.add_compute_flags(p, threads=(1, "torch CPU threads (default 1)"))
    out = flags.add_output_flags(p, json="one JSON object")
    out.add_argument("--out", type=Path, required=True, help="bundle directory to write")


def _rlif_flags(g) -> None:
    """``--method rlif``'s settings: the critic, the policy extraction and its regularizers."""
    g.add_argument("--beta", type=float, default=1.0,
                   help="rlif: inverse temperature of the standardized advantage weights "
                        "(default 1)")
    g.add_argument("--gamma", type=float, default=0.95, help="rlif: discount (default 0.95)")
    g.add_argument("--extract", choices=("awr", "qmax", "greedy"), default="awr",
                   help="rlif policy extraction: awr (advantage-weighted regression on the "
                        "executed actions, default), qmax (TD3+BC: maximise the critic's "
                        "Q(s, pi(s)) plus the regression to the executed action) or greedy "
                        "(on every recorded state: the critic's best grid action where it beats "
                        "the starting policy's by --margin advantage stds, else the start's)")
    g.add_argument("--margin", type=float, default=2.0,
                   help="rlif --extract greedy: the Q gain, in standard deviations of the "
                        "data's advantages, a grid action needs over the start's (default 2)")
    g.add_argument("--critics", type=int, default=1,
                   help="rlif --extract greedy: independently initialised critics; a state's "
                        "action changes only where every critic's gain clears the margin "
                        "(default 1)")
    g.add_argument("--alpha", type=float, default=2.5,
                   help="rlif --extract qmax: weight of the Q term (default 2.5)")
    g.add_argument("--actor-data", choices=("all", "own"), default="all",
                   help="rlif: the policy update regresses on all executed actions (default) "
                        "or only the policy's own (the operator's steps then only shape the "
                        "critic's reward; their commands are not imitated)")
    g.add_argument("--anchor", type=float, default=0.0,
                   help="rlif: weight of a trust region, the squared distance of the policy's "
                        "output to the starting bundle's on every recorded state (default 0: "
                        "off)")


def run(args: argparse.Namespace) -> int:
    import torch

    from edgerl.apps.cli.output import print_result
    from edgerl.contract.intervention_log import load_transitions
    from edgerl.export.bundle_mlp import export_like, load_bundle_mlp
    from edgerl.policies.rlif import FinetuneConfig, finetune

    torch.set_num_threads(max(1, args.threads))
    for f in args.interventions:
        if not f.is_file():
            raise CliError(f"--interventions {f}: no such file")
    if not (args.bundle / "manifest.json").exists():
        raise CliError(f"--bundle {args.bundle}: no manifest.json there")
    try:
        cfg = FinetuneConfig(method=args.method, steps=args.steps, beta=args.beta,
                             gamma=args.gamma, seed=args.seed, extract=args.extract,
                             alpha=args.alpha, actor_data=args.actor_data,
                             anchor=args.anchor, margin=args.margin,
                             critics=args.critics)
        actor, spec = load_bundle_mlp(args.bundle)
        steps = load_transitions(args.interventions, spec.edit_obs.fast_dim)
        if steps["edit_obs"].shape[1] != spec.edit_obs.dim:
            raise ValueError(f"the recordings' edit observation has "
                             f"{steps['edit_obs'].shape[1]} elements, the bundle's "
                             f"{spec.edit_obs.dim}: recorded with another bundle?")
        result = finetune(actor, steps, spec.residual_bound, cfg)
        export_like(result.actor, spec, args.out, steps["edit_obs"], seed=args.seed)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    out = {"bundle": str(args.out), "method": args.method, "steps": args.steps,
           "recordings": [str(f) for f in args.interventions], **result.stats}
    print_result(out, as_json=args.json, key="key", title="edgerl finetune")
    return 0
