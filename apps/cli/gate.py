"""``edgerl gate train|eval|export``: the planning-budget gate.

``train`` fits the gate with PPO (:mod:`edgerl.policies.gate.policy`) into ``--out`` and, unless
``--episodes 0``, compares it; ``eval`` compares a trained gate on the same episodes with each
fixed budget, the chunk-age heuristic (budget and X tuned on other episodes) and random
choices. Both print a table
(``--json``: a JSON list of rows: policy, episodes, success_rate, return_mean, length_mean,
share_<budget>). ``export`` writes the trained gate as ``gate.onnx`` into a bundle
(``--bundle DIR``: an existing bundle of the same task; ``--out DIR``: a new gate-only
planner bundle) with the manifest's ``gate`` section and two parity checks
(:mod:`edgerl.export.gate`).
"""

from __future__ import annotations

import argparse

from edgerl.apps.cli import flags

HELP = "planning-budget gate: train it (PPO, sim) or compare it with fixed budgets/heuristics"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="gate_cmd", metavar="CMD", required=True)
    train = sub.add_parser("train", help="train a gate with PPO into --out")
    _train_flags(train)
    ev = sub.add_parser("eval", help="compare a trained gate with the baselines")
    ev.add_argument("run", help="run directory written by `edgerl gate train`")
    for q in (train, ev):
        flags.add_episode_flags(q, episodes=(32, "episodes per compared policy (default 32; "
                                                 "train: 0 = no eval)"),
                                eval_envs=(16, "parallel eval envs"))
        flags.add_compute_flags(q, threads=(1, "torch CPU threads (default 1)"))
        flags.add_output_flags(q, json="a JSON list of rows")
    ex = sub.add_parser("export", help="write the trained gate as gate.onnx into a bundle")
    ex.add_argument("run", help="run directory written by `edgerl gate train`")
    where = ex.add_mutually_exclusive_group(required=True)
    where.add_argument("--bundle", help="add the gate to this existing bundle (same task)")
    where.add_argument("--out", help="write a new gate-only planner bundle here")
    parity = flags.add_episode_flags(ex, seed=(0, "seed of the parity observations"))
    parity.add_argument("--parity", type=int, default=256,
                        help="recorded (and as many random) parity observations (default 256)")
    flags.add_output_flags(ex, json="the result as JSON")


def _train_flags(train: argparse.ArgumentParser) -> None:
    """``edgerl gate train``'s own flags: the run, PPO's size, the scenario and the budgets."""
    train.add_argument("--out", required=True, help="run directory (created)")
    ppo = flags.add_episode_flags(train, num_envs=(32, "parallel envs (default 32)"),
                                  seed=(0, "seed (default 0)"))
    ppo.add_argument("--iterations", type=int, default=40, help="PPO iterations (default 40)")
    ppo.add_argument("--steps-per-env", type=int, default=32,
                     help="decisions per env per iteration (default 32)")
    scenario = train.add_argument_group("scenario")
    scenario.add_argument("--budget-latency", action="append", default=[], metavar="NAME=FILE",
                          help="take budget NAME's delay from a LatencyModel JSON (`edgerl bench "
                               "planner --write-latency-model FILE`); repeatable")
    scenario.add_argument("--road", default="curves",
                          choices=("curves", "straights", "chicanes", "calm_kicks"),
                          help="driving road / scenario (edgerl.policies.gate.policy.ROADS and "
                               "ROAD_GATES; default curves)")
    scenario.add_argument("--head", default="categorical", choices=("categorical", "gaussian"),
                          help="the gate's output distribution: categorical (PPO samples a "
                               "budget from softmax(logits), the greedy gate runs the mode) or "
                               "gaussian (argmax of Gaussian scores); default categorical")


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    import torch

    from edgerl.apps.cli.errors import CliError
    from edgerl.apps.cli.output import print_json, print_table
    from edgerl.policies.gate.policy import (
        ROADS,
        GateRunCfg,
        compare_gate,
        gate_with_latencies,
        load_gate,
        road_gate_cfg,
        train_gate,
    )

    if args.gate_cmd == "export":
        return _export(args)
    torch.set_num_threads(max(1, args.threads))
    if args.episodes < 0 or args.eval_envs < 1:
        raise CliError("--episodes must be >= 0 and --eval-envs >= 1")
    if args.gate_cmd == "train":
        if args.iterations < 1 or args.num_envs < 1 or args.steps_per_env < 1:
            raise CliError("--iterations, --num-envs and --steps-per-env must be >= 1")
        pairs = [item.partition("=") for item in args.budget_latency]
        if any(not name or not sep or not path for name, sep, path in pairs):
            raise CliError("--budget-latency: expected NAME=FILE")
        try:
            gate = (gate_with_latencies({n: p for n, _, p in pairs}, args.seed, args.road)
                    if pairs else asdict(road_gate_cfg(args.road, args.seed)))
        except (OSError, ValueError) as exc:
            raise CliError(f"--budget-latency: {exc}") from exc
        cfg = GateRunCfg(num_envs=args.num_envs, iterations=args.iterations,
                         steps_per_env=args.steps_per_env, seed=args.seed, gate=gate,
                         task_kwargs=dict(ROADS[args.road]), head=args.head)
        gate, _ = train_gate(cfg, args.out, show_progress=not args.json)
    else:
        try:
            cfg, gate = load_gate(args.run)
        except (FileNotFoundError, KeyError, TypeError, ValueError) as exc:
            raise CliError(f"{args.run}: not a gate run ({exc})") from exc
    if args.episodes == 0:
        return 0
    rows = compare_gate(cfg, gate, args.episodes, num_envs=args.eval_envs)
    if args.json:
        print_json(rows)
    else:
        print_table([{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}
                     for r in rows], title=f"edgerl gate ({cfg.task}, seed {cfg.seed})")
    return 0


def _export(args: argparse.Namespace) -> int:
    import torch

    from edgerl.apps.cli.errors import CliError
    from edgerl.apps.cli.output import print_json, print_table
    from edgerl.contract.bundle_errors import BundleError
    from edgerl.export.gate import export_gate
    from edgerl.export.onnx_export import ExportError

    torch.set_num_threads(1)
    if args.parity < 1:
        raise CliError("--parity must be >= 1")
    try:
        res = export_gate(args.run, args.out or args.bundle, create=args.out is not None,
                          n_parity=args.parity, seed=args.seed)
    except (FileNotFoundError, KeyError) as exc:
        raise CliError(f"{args.run}: not a gate run ({exc})") from exc
    except (BundleError, ExportError) as exc:
        raise CliError(str(exc)) from exc
    gate = res.spec.gate
    assert gate is not None
    rows = [{"check": name, "observations": p.n_observations, "max_abs_err": p.max_abs_err,
             "tolerance": p.outputs[0].tolerance, "ok": p.ok}
            for name, p in (("gate_onnx", res.scores), ("gate_argmax", res.argmax))]
    if args.json:
        print_json({"bundle": str(res.bundle), "budgets": gate.names, "obs_dim": gate.dim,
                    "decision_steps": gate.decision_steps, "parity": rows})
    else:
        print_table(rows, title=f"gate.onnx -> {res.bundle} (budgets {', '.join(gate.names)})")
    return 0
