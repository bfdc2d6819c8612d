"""Expert / zero-action success rates of the torch tasks (docs/sim.md quotes these).

Usage: python -m edgerl.apps.experiments.probes.sim_expert [--num-envs 512]
Counts the outcomes of every episode that ends within ``max_episode_steps`` steps.
"""

from __future__ import annotations

import argparse

import torch

from edgerl.contract.spec import LatencyModel
from edgerl.sim import make_task
from edgerl.sim.wrappers import LatencyCfg, make_latency_env


def outcomes(task: str, policy: str, num_envs: int, **kw: object) -> dict[str, object]:
    """``policy``: expert, zero, or ``planner_D_P`` (expert chunks open loop, delay D, period P)."""
    env = make_task(task, num_envs=num_envs, seed=1, **kw)
    if policy.startswith("planner_"):
        d, p = (int(v) for v in policy.split("_")[1:])
        lat = LatencyModel(planner_delay_steps=d, planner_period_steps=p)
        env = make_latency_env(env, LatencyCfg(method="planner", latency=lat))
    succ = fail = ended = 0
    for _ in range(int(env.max_episode_length)):
        act = env.expert_action() if policy == "expert" else torch.zeros(num_envs,
                                                                          env.num_actions)
        _, _, dones, ex = env.step(act)
        succ += int(ex["success"].sum())
        ended += int(dones.sum())
        fail += int((dones & ~ex["time_outs"] & ~ex["success"]).sum())
    return {"task": task, "policy": policy, **kw, "episodes": ended,
            "success_rate": round(succ / max(ended, 1), 4), "failures": fail}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--num-envs", type=int, default=512)
    args = p.parse_args()
    torch.set_num_threads(1)
    rows = [outcomes("cartpole", pol, args.num_envs)
            for pol in ("expert", "zero", "planner_0_4", "planner_3_4", "planner_7_4")]
    for model in ("dynamic", "kinematic"):
        for surface in ("dry", "wet", "ice"):
            rows.append(outcomes("driving", "expert", args.num_envs, model=model,
                                 surface=surface))
    rows.append(outcomes("driving", "zero", args.num_envs))
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
