"""How fast rsl_rl PPO learns the ``cartpole`` smoke task (docs/sim.md quotes this).

Usage: python -m edgerl.apps.experiments.probes.cartpole_ppo [--num-envs 512] [--iterations 30]
       [--threads 1] [--method edit --delay 7 --period 4]
Every 5 iterations: deterministic policy on 256 fresh envs (seed 123) for one episode length;
prints the success rate of the episodes that ended and the wall time so far (training + eval).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import time

import torch

from edgerl.contract.spec import LatencyModel
from edgerl.sim import make_task
from edgerl.sim.wrappers import LatencyCfg, make_latency_env


def build(args: argparse.Namespace, num_envs: int, seed: int):
    env = make_task("cartpole", num_envs=num_envs, seed=seed)
    if args.method:
        lat = LatencyModel(planner_delay_steps=args.delay, planner_period_steps=args.period)
        env = make_latency_env(env, LatencyCfg(method=args.method, latency=lat))
    return env


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--num-envs", type=int, default=512)
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--method", default="")
    p.add_argument("--delay", type=int, default=7)
    p.add_argument("--period", type=int, default=4)
    args = p.parse_args()
    from rsl_rl.runners import OnPolicyRunner

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    env = build(args, args.num_envs, 0)
    mlp = {"class_name": "MLPModel", "hidden_dims": [64, 64], "activation": "elu",
           "obs_normalization": True}
    cfg = {"algorithm": {"class_name": "PPO", "learning_rate": 1e-3, "num_learning_epochs": 5,
                         "num_mini_batches": 4, "entropy_coef": 0.005, "gamma": 0.99},
           "actor": {**mlp, "distribution_cfg": {"class_name": "GaussianDistribution",
                                                 "init_std": 1.0}},
           "critic": dict(mlp), "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
           "num_steps_per_env": 24, "save_interval": 10_000, "multi_gpu": None}
    with contextlib.redirect_stdout(io.StringIO()):
        runner = OnPolicyRunner(env, cfg, log_dir=None, device="cpu")
    start = time.perf_counter()
    for block in range(args.iterations // 5):
        with contextlib.redirect_stdout(io.StringIO()):
            runner.learn(5)
        policy = runner.get_inference_policy()
        ev = build(args, 256, 123)
        obs, succ, ended = ev.get_observations(), 0, 0
        with torch.no_grad():
            for _ in range(int(ev.max_episode_length)):
                obs, _, dones, extras = ev.step(policy(obs))
                succ += int(extras["success"].sum())
                ended += int(dones.sum())
        print(f"iteration {(block + 1) * 5:3d}  wall {time.perf_counter() - start:6.1f} s  "
              f"success_rate {succ / max(ended, 1):.3f}  episodes {ended}", flush=True)


if __name__ == "__main__":
    main()
