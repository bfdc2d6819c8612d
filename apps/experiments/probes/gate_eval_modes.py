"""A trained gate evaluated two ways on the same evaluation episodes (seed + 1000): greedy
(the runtime's choice: the argmax of the actor's output) and sampled (the policy PPO trained:
a budget drawn from softmax(logits) for a categorical head, argmax of the mean scores plus
Gaussian noise with the learned std for a Gaussian head; generator seeded with the run seed).

    python -m edgerl.apps.experiments.probes.gate_eval_modes runs/gate7_ch0 --episodes 32
    python -m edgerl.apps.experiments.probes.gate_eval_modes runs/gate8_ck0 --episodes 32 \
        --compare --kick-oracle slow,80,fast,6

``--compare`` adds the rows of ``edgerl gate eval`` on the same episodes (each fixed budget, the
age heuristic tuned on seed + 2000, random); ``--kick-oracle BUDGET,X,KICK_BUDGET,WAIT`` the
privileged :func:`~edgerl.policies.gate.oracles.kick_rule` with those settings (budget names,
steps; e.g. the one ``edgerl.apps.experiments.probes.gate_oracle`` tuned), reacting for
``kick_steps + 4`` steps.
"""

from __future__ import annotations

import argparse
import json

import torch

from edgerl.policies.gate.baselines import evaluate_gate
from edgerl.policies.gate.oracles import kick_rule
from edgerl.policies.gate.policy import (
    EVAL_SEED_OFFSET,
    compare_gate,
    greedy_policy,
    load_gate_actor,
    make_gate_env,
)


def sampled_policy(actor, head: str, seed: int):
    """The stochastic policy PPO optimised (see the module doc)."""
    gen = torch.Generator().manual_seed(seed)

    @torch.no_grad()
    def policy(env, obs):
        out = actor(obs)
        if head == "categorical":
            return torch.multinomial(out.softmax(-1), 1, generator=gen).squeeze(-1)
        noise = torch.randn(out.shape, generator=gen) * actor.distribution.std_param.abs()
        return (out + noise).argmax(-1)

    return policy


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run")
    p.add_argument("--episodes", type=int, default=32)
    p.add_argument("--eval-envs", type=int, default=16)
    p.add_argument("--compare", action="store_true",
                   help="also fixed budgets, the tuned heuristic and random (edgerl gate eval)")
    p.add_argument("--kick-oracle", default="", metavar="BUDGET,X,KICK_BUDGET,WAIT",
                   help="also the privileged kick rule with these settings")
    args = p.parse_args()
    torch.set_num_threads(1)
    cfg, actor = load_gate_actor(args.run)

    def make():
        return make_gate_env(cfg, args.eval_envs, cfg.seed + EVAL_SEED_OFFSET)

    for mode, policy in (("greedy", greedy_policy(actor)),
                         ("sampled", sampled_policy(actor, cfg.head, cfg.seed))):
        row = evaluate_gate(make, policy, args.episodes)
        print(json.dumps({"run": args.run, "head": cfg.head, "mode": mode, **row}), flush=True)
    if args.kick_oracle:
        gcfg = cfg.gate_cfg(cfg.seed)
        index = {b.name: j for j, b in enumerate(gcfg.budgets)}
        name, x, kick_name, wait = args.kick_oracle.split(",")
        if name not in index or kick_name not in index:
            raise SystemExit(f"--kick-oracle: budgets are {', '.join(index)}")
        rule = kick_rule(index[name], int(x), gcfg.kick_steps + 4, index[kick_name], int(wait))
        print(json.dumps({"run": args.run, "policy": f"oracle:kick({args.kick_oracle})",
                          **evaluate_gate(make, rule, args.episodes)}), flush=True)
    if args.compare:
        for row in compare_gate(cfg, None, args.episodes, num_envs=args.eval_envs):
            print(json.dumps({"run": args.run, **row}), flush=True)


if __name__ == "__main__":
    main()
