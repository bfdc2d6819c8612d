"""How a gate policy answers kicks: for every kick on the evaluation episodes, whether a plan
was asked within ``--within`` steps of its start (and which budget), and whether the episode
failed (left the lane) within ``--fail-within`` steps of it. A gate that does not see or does
not answer kicks fails after them; the privileged kick oracle shows what answering buys.

    python -m edgerl.apps.experiments.probes.gate_kick_response runs/gate8_ck0 --heuristic fast,12 \
        --kick-oracle slow,80,fast,6

A categorical gate's first row: its mean budget probabilities, run sampled, right after kicks,
where the running plan ends, and elsewhere (does it react to a kick at all?).

``--visibility`` (no run): whether a kick shows in the gate's observation at all
(:func:`kick_visibility`).

Rows (JSON, one per policy): kicks, answered share (a plan asked within the window), the
budget share of those answers, failures within the window after a kick, all failures, and the
share of decisions taken without a running plan.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch

from edgerl.policies.gate.baselines import GatePolicy, age_heuristic
from edgerl.policies.gate.oracles import kick_rule
from edgerl.policies.gate.policy import (
    EVAL_SEED_OFFSET,
    greedy_policy,
    load_gate_actor,
    make_gate_env,
)


@torch.no_grad()
def kick_response(env, policy: GatePolicy, decisions: int, within: int, fail_within: int
                  ) -> dict[str, float]:
    """Run ``decisions`` decisions of ``policy`` on ``env`` (kicks on); count the kicks, the
    ones answered by a plan request within ``within`` steps of their start (by budget), and
    the failed episodes (not success, not time-out) that ended within ``fail_within`` steps
    of a kick's start and of any time, and the share of decisions taken without a running
    plan (the command is zero then)."""
    k = env.gate_cfg.decision_steps
    keep = torch.tensor([b.keep for b in env.budgets])
    answered_now = torch.zeros(env.num_envs, dtype=torch.bool)
    kicks = failed_after = failures = planless = 0
    by_budget = torch.zeros(env.num_budgets)
    obs = env.get_observations()
    for _ in range(decisions):
        idx = policy(env, obs).cpu()
        planless += int((~env.has_plan()).sum())
        hit = (env.kick_age.cpu() < within) & ~keep[idx] & ~answered_now
        answered_now |= hit
        by_budget += torch.bincount(idx[hit], minlength=env.num_budgets).float()
        obs, _, dones, extras = env.step(idx.to(env.device))
        age = env.kick_age.cpu()
        fail = (dones & ~extras["success"].to(torch.bool) & ~extras["time_outs"].to(torch.bool))
        failures += int(fail.sum())
        failed_after += int((fail.cpu() & (age < fail_within)).sum())
        new = age < k  # a kick started during these k steps
        kicks += int(new.sum())
        answered_now &= ~new
    share = (by_budget / by_budget.sum().clamp_min(1)).tolist()
    return {"kicks": kicks, "answered": round(float(by_budget.sum()) / max(kicks, 1), 3),
            **{f"answer_{b.name}": round(p, 3) for b, p in zip(env.budgets, share, strict=True)},
            "failures_after_kick": failed_after, "failures": failures,
            "no_plan_share": round(planless / (decisions * env.num_envs), 4)}


@torch.no_grad()
def ask_probabilities(env, actor, decisions: int, within: int, seed: int) -> dict[str, Any]:
    """The categorical gate run sampled (as PPO trained it) for ``decisions`` decisions: its
    mean budget probabilities (softmax of the logits) in three kinds of state: a kick started
    within ``within`` steps, a running plan with at most 8 rows left (or none), and the rest."""
    gen = torch.Generator().manual_seed(seed)
    sums = {kind: torch.zeros(env.num_budgets) for kind in ("kick", "plan_ending", "calm")}
    counts = dict.fromkeys(sums, 0)
    obs = env.get_observations()
    for _ in range(decisions):
        prob = actor(obs).softmax(-1).cpu()
        kick = env.kick_age.cpu() < within
        s = env.scheduler
        ending = (~env.has_plan() | (env.cur_rows - s.row_index() <= 8)).cpu() & ~kick
        for kind, m in (("kick", kick), ("plan_ending", ending), ("calm", ~kick & ~ending)):
            sums[kind] += prob[m].sum(0)
            counts[kind] += int(m.sum())
        obs, *_ = env.step(torch.multinomial(prob, 1, generator=gen).squeeze(-1))
    return {f"p_{kind}": {b.name: round(float(v) / max(counts[kind], 1), 3)
                          for b, v in zip(env.budgets, sums[kind], strict=True)}
            | {"n": counts[kind]} for kind in sums}


@torch.no_grad()
def kick_visibility(decisions: int, num_envs: int, seed: int) -> list[dict[str, Any]]:
    """Can the gate see a kick? On ``calm_kicks`` under the kick oracle (slow > 80, fast after
    a kick's end): per decision the yaw rate (obs 2) against the yaw rate the plan's row
    executed now (preview offset 0, steering at obs 8) gives on a kinematic bicycle
    (``v tan(steer * steer_max) / wheelbase``), and |yaw rate| alone; quantiles (p50, p90,
    p99) for decisions within 8 steps of a kick's start, on a swerve (|curvature| > 0.02 1/m
    at the car) and on calm road."""
    from dataclasses import asdict

    from edgerl.policies.gate.oracles import road_task
    from edgerl.policies.gate.policy import ROADS, GateRunCfg, calm_kicks_gate_cfg

    g = calm_kicks_gate_cfg(seed)
    cfg = GateRunCfg(task_kwargs=dict(ROADS["calm_kicks"]), gate=asdict(g), seed=seed)
    env = make_gate_env(cfg, num_envs, seed + EVAL_SEED_OFFSET)
    task = road_task(env)
    steer_max, wheelbase = task.cfg.steer_max, task.cfg.l_front + task.cfg.l_rear
    policy = kick_rule(2, 80, g.kick_steps + 4, 1, g.kick_steps)
    cols: dict[str, list[torch.Tensor]] = {k: [] for k in ("res", "yaw", "kick", "sharp")}
    obs = env.get_observations()
    try:
        for _ in range(decisions):
            o = obs["policy"]
            yaw_plan = o[:, 0] * torch.tan(o[:, 8].clamp(-1, 1) * steer_max) / wheelbase
            cols["res"].append((o[:, 2] - yaw_plan).abs())
            cols["yaw"].append(o[:, 2].abs())
            cols["kick"].append(env.kick_age < 8)
            cols["sharp"].append(task.road.curvature(task.state.x[:, 0]).abs() > 0.02)
            obs, *_ = env.step(policy(env, obs))
    finally:
        env.close()
    res, yaw, kick, sharp = (torch.cat(v) for v in cols.values())
    q = torch.tensor([0.5, 0.9, 0.99])
    return [{"state": name, "decisions": int(m.sum()),
             "yaw_minus_plan_yaw": [round(float(v), 3) for v in torch.quantile(res[m], q)],
             "abs_yaw_rate": [round(float(v), 3) for v in torch.quantile(yaw[m], q)]}
            for name, m in (("kick (first 8 steps)", kick), ("swerve, no kick", sharp & ~kick),
                            ("calm, no kick", ~sharp & ~kick))]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", nargs="?", help="a gate run directory (not with --visibility)")
    p.add_argument("--visibility", action="store_true",
                   help="only the kick-visibility table of calm_kicks (no run needed)")
    p.add_argument("--seed", type=int, default=0, help="--visibility: scenario seed")
    p.add_argument("--decisions", type=int, default=320)
    p.add_argument("--eval-envs", type=int, default=16)
    p.add_argument("--within", type=int, default=12, help="steps after a kick's start")
    p.add_argument("--fail-within", type=int, default=40)
    p.add_argument("--heuristic", default="", metavar="BUDGET,X")
    p.add_argument("--kick-oracle", default="", metavar="BUDGET,X,KICK_BUDGET,WAIT")
    args = p.parse_args()
    torch.set_num_threads(1)
    if args.visibility:
        for row in kick_visibility(args.decisions, args.eval_envs, args.seed):
            print(json.dumps(row), flush=True)
        return
    if not args.run:
        raise SystemExit("give a gate run directory (or --visibility)")
    cfg, actor = load_gate_actor(args.run)
    gcfg = cfg.gate_cfg(cfg.seed)
    index = {b.name: j for j, b in enumerate(gcfg.budgets)}
    policies: dict[str, GatePolicy] = {"gate (greedy)": greedy_policy(actor)}
    if args.heuristic:
        name, x = args.heuristic.split(",")
        policies[f"age>{x}:{name}"] = age_heuristic(index[name], int(x))
    if args.kick_oracle:
        name, x, kname, wait = args.kick_oracle.split(",")
        policies[f"oracle:kick({args.kick_oracle})"] = kick_rule(
            index[name], int(x), gcfg.kick_steps + 4, index[kname], int(wait))
    if cfg.head == "categorical":
        env = make_gate_env(cfg, args.eval_envs, cfg.seed + EVAL_SEED_OFFSET)
        try:
            row = ask_probabilities(env, actor, args.decisions, args.within, cfg.seed)
        finally:
            env.close()
        print(json.dumps({"run": args.run, "policy": "gate (sampled): probabilities", **row}),
              flush=True)
    for label, policy in policies.items():
        env = make_gate_env(cfg, args.eval_envs, cfg.seed + EVAL_SEED_OFFSET)
        try:
            row = kick_response(env, policy, args.decisions, args.within, args.fail_within)
        finally:
            env.close()
        print(json.dumps({"run": args.run, "policy": label, **row}), flush=True)


if __name__ == "__main__":
    main()
