"""Why latency matters on ``ball_balance``: success vs observation age and planner delay.

Prints two tables (``--json`` for machines):
1. the PD expert acting on observations ``d`` control steps old (first episode of each env);
2. The ``LatencyWrapper(method="planner")`` with the expert planner: chunks executed open
   loop, planner delay D and period P in control steps.

Usage: ``python -m edgerl.apps.experiments.probes.mujoco_latency [--num-envs 128] [--json]``
"""

from __future__ import annotations

import argparse
from collections import deque

import torch

from edgerl.apps.cli.output import print_json, print_table
from edgerl.sim.registry import make_task
from edgerl.sim.tasks.ball import ball_expert


def _first_episode_success(env, policy) -> tuple[float, float]:
    n = env.num_envs
    ended = torch.zeros(n, dtype=torch.bool)
    success = torch.zeros(n, dtype=torch.bool)
    fell = torch.zeros(n, dtype=torch.bool)
    obs = env.get_observations()
    for _ in range(env.unwrapped.spec.max_episode_steps if hasattr(env, "unwrapped")
                   else env.spec.max_episode_steps):
        obs, _, dones, extras = env.step(policy(obs))
        new = dones & ~ended
        success |= new & extras["success"]
        fell |= new & ~extras["time_outs"]
        ended |= dones
    return success.float().mean().item(), fell.float().mean().item()


def delayed_expert(num_envs: int, seed: int, delay: int) -> dict:
    env = make_task("ball_balance", num_envs=num_envs, seed=seed)
    history = deque([env.get_observations()["policy"]] * (delay + 1), maxlen=delay + 1)

    def policy(obs):
        history.append(obs["policy"])
        return torch.from_numpy(ball_expert(history[0], env.cfg)).float()

    success, fell = _first_episode_success(env, policy)
    return {"obs_age_steps": delay, "obs_age_ms": round(delay * env.spec.control_dt * 1e3),
            "success": round(success, 3), "fell": round(fell, 3)}


def planner_only(num_envs: int, seed: int, delay: int, period: int) -> dict:
    from edgerl.sim.wrappers import LatencyCfg, make_latency_env

    env = make_task("ball_balance", num_envs=num_envs, seed=seed)
    cfg = LatencyCfg(method="planner", latency={"planner_delay_steps": delay,
                                                "planner_period_steps": period})
    wrapped = make_latency_env(env, cfg)
    zeros = torch.zeros(num_envs, env.num_actions)
    success, fell = _first_episode_success(wrapped, lambda obs: zeros)
    return {"planner_delay_steps": delay, "planner_period_steps": period,
            "success": round(success, 3), "fell": round(fell, 3)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", type=int, default=128)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    table1 = [delayed_expert(args.num_envs, args.seed, d) for d in (0, 2, 3, 5, 8)]
    table2 = [planner_only(args.num_envs, args.seed, d, pp)
              for d, pp in ((0, 1), (0, 5), (5, 1), (5, 5), (10, 5))]
    if args.json:
        print_json({"delayed_expert": table1, "planner_only": table2})
    else:
        print_table(table1, title="ball_balance: PD expert on old observations")
        print_table(table2, title="ball_balance: expert planner alone (open-loop chunks)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
