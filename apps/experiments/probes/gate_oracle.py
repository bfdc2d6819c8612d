"""The oracle margin of a gate scenario: how much better than the tuned chunk-age heuristic a
state-dependent choice can do at all, measured with privileged rules before any gate is trained.

For each scenario variant: every fixed budget, the age heuristic (every plan budget x X) and the
privileged rules of :mod:`edgerl.policies.gate.oracles` (road curvature ahead; kick times when
the variant has kicks) are each tuned on the tuning episodes (seed + 2000) and the best of
each family is evaluated on the evaluation episodes (seed + 1000), as ``compare_gate`` does.

    python -m edgerl.apps.experiments.probes.gate_oracle --variants chicanes,chicanes_kicks \
        --episodes 32 --json

Variants (all on the ``chicanes`` road, from ``chicanes_gate_cfg``):
    chicanes           the ``gate-chicanes-price`` scenario unchanged;
    chicanes_kicks     + kicks (rate 0.01 per step, +-0.5 steering for 4 steps), process noise
                       0.02 on steering only;
    exact_fast_kicks   chicanes_kicks with an exact fast planner (24 rows, no hold, noise 0.05);
    small_fast         a small fast model (its plan x 0.5, price 0.1) and a pricier slow one
                       (0.5): a state-dependent split between them is what could win;
    steer_noise_gain   process noise on steering 0 + 0.5 |steering| (large in the swerves);
    calm_kicks         ``calm_kicks_gate_cfg``: no process noise, exact plans
                       (slow: delay 8, 96 rows), rare large kicks (0.004 per step, +-0.8 for
                       6 steps), price 1.0 per call: plans hold for seconds until a kick;
    calm_kicks_p04     calm_kicks at the chicanes price, 0.4 per call;
    calm_kicks_small   calm_kicks with smaller kicks (+-0.4): fewer lane departures to save.

The kick oracle asks one budget by age (or when its plan would run out before a new one
arrives) and, after a kick, another (``kick_rule``'s ``kick_budget``), right at the kick's
start or once it ended (``wait``); ``--families`` restricts the families run (e.g. ``fixed,
age,kick`` for the seed-to-seed spread without the 36 curvature rules).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from typing import Any

import torch

from edgerl.policies.gate.baselines import age_heuristic, evaluate_gate, fixed_policy
from edgerl.policies.gate.oracles import curvature_rule, kick_rule
from edgerl.policies.gate.policy import (
    EVAL_SEED_OFFSET,
    HEURISTIC_AGES,
    ROADS,
    TUNE_SEED_OFFSET,
    GateRunCfg,
    calm_kicks_gate_cfg,
    chicanes_gate_cfg,
    make_gate_env,
)
from edgerl.sim.gate.env import GateCfg


def variant(name: str, seed: int) -> GateCfg:
    """The named scenario variant's :class:`GateCfg` (see the module doc)."""
    g = chicanes_gate_cfg(seed)
    keep, fast, slow = g.budgets
    if name == "chicanes":
        return g
    if name in ("chicanes_kicks", "exact_fast_kicks"):
        g.action_noise_std, g.noise_dims = 0.02, (1,)
        g.kick_rate, g.kick_size, g.kick_steps = 0.01, 0.5, 4
        if name == "exact_fast_kicks":
            g.budgets = (keep, replace(fast, horizon=24, hold=1, noise_std=0.05), slow)
        return g
    if name == "small_fast":
        g.budgets = (keep, replace(fast, gain=0.5, cost=0.1), replace(slow, cost=0.5))
        return g
    if name == "steer_noise_gain":
        g.action_noise_std, g.action_noise_gain, g.noise_dims = 0.0, 0.5, (1,)
        return g
    if name.startswith("calm_kicks"):
        g = calm_kicks_gate_cfg(seed)
        if name == "calm_kicks_p04":
            g.budgets = tuple(replace(b, cost=0.4 * (not b.keep)) for b in g.budgets)
        elif name == "calm_kicks_small":
            g.kick_size = 0.4
        elif name != "calm_kicks":
            raise SystemExit(f"unknown variant {name!r}")
        return g
    raise SystemExit(f"unknown variant {name!r}")


def candidates(g: GateCfg) -> dict[str, dict[str, Any]]:
    """Every rule tried, by family: {family: {label: policy}}."""
    plan = [j for j, b in enumerate(g.budgets) if not b.keep]
    names = {j: g.budgets[j].name for j in plan}
    fams: dict[str, dict[str, Any]] = {
        "fixed": {f"fixed:{names[j]}": fixed_policy(j) for j in plan},
        "age heuristic": {f"age>{x}:{names[j]}": age_heuristic(j, x)
                          for j in plan for x in HEURISTIC_AGES},
        # sharp: the first plan budget (fast) every X; calm: any plan budget
        "oracle: curvature ahead": {
            f"curv{look:.0f}m: {names[js]}>{xs} / {names[jc]}>{xc}":
                curvature_rule(look, 0.02, (js, xs), (jc, xc))
            for look in (15.0, 30.0) for js in plan[:1] for xs in (2, 4, 8)
            for jc in plan for xc in (8, 16, 32)},
    }
    if g.kick_rate > 0:
        # by age with budget j; after a kick: budget jk, at its start (wait 0) or its end
        fams["oracle: kick times"] = {
            f"kick: {names[j]}>{x}, kick -> {names[jk]} wait {w}":
                kick_rule(j, x, g.kick_steps + 4, jk, w)
            for j in plan for x in (8, 16, 32, 48, 80) if x < g.budgets[j].horizon
            for jk in plan for w in (0, g.kick_steps)}
    return fams


def run_variant(name: str, seed: int, episodes: int, num_envs: int,
                families: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Best rule of each family on the tuning episodes, evaluated on the evaluation ones;
    ``families``: only those whose name contains one of these words (empty = all)."""
    g = variant(name, seed)
    cfg = GateRunCfg(task_kwargs=dict(ROADS["chicanes"]), gate=asdict(g), seed=seed)
    rows = []
    for family, rules in candidates(g).items():
        if families and not any(f in family for f in families):
            continue
        t0 = time.time()
        tried = {label: evaluate_gate(lambda: make_gate_env(cfg, num_envs,
                                                            seed + TUNE_SEED_OFFSET),
                                      rule, episodes)
                 for label, rule in rules.items()}
        best = max(tried, key=lambda k: (tried[k]["return_mean"], tried[k]["success_rate"]))
        ev = evaluate_gate(lambda: make_gate_env(cfg, num_envs, seed + EVAL_SEED_OFFSET),
                           rules[best], episodes)
        rows.append({"variant": name, "seed": seed, "family": family, "best": best,
                     "tried": len(rules), "tune_return": tried[best]["return_mean"],
                     **ev, "wall_s": round(time.time() - t0, 1)})
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", default="chicanes,chicanes_kicks,small_fast")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--episodes", type=int, default=32)
    p.add_argument("--num-envs", type=int, default=16)
    p.add_argument("--families", default="",
                   help="comma list of words: run only the families naming one (default all)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    fams = tuple(f.strip() for f in args.families.split(",") if f.strip())
    rows = [r for v in args.variants.split(",")
            for r in run_variant(v.strip(), args.seed, args.episodes, args.num_envs, fams)]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'variant':18s} {'family':24s} {'best (tuned)':44s} {'tune':>7s} {'eval':>7s} succ")
    for r in rows:
        print(f"{r['variant']:18s} {r['family']:24s} {r['best']:44s} {r['tune_return']:7.2f} "
              f"{r['return_mean']:7.2f} {r['success_rate']:.2f}")


if __name__ == "__main__":
    main()
