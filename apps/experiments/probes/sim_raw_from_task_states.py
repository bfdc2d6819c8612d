"""Does the raw-physics reference's state matter? For each task: the
task's step, a raw batch stepped from rest, and a raw batch restarted from the task's current
states before each block (best of 15 blocks of 20 steps, 256 envs).
Usage: ``python -m edgerl.apps.experiments.probes.sim_raw_from_task_states arm_reach arm_push
ball_balance``."""

from __future__ import annotations

import sys
import time

import torch

from edgerl.apps.experiments.probes.sim_profile_step import best_us
from edgerl.sim.mujoco.backends import MujocoBatch
from edgerl.sim.registry import make_task


def measure(task: str) -> None:
    """Print the three timings of ``task`` (256 envs)."""
    env = make_task(task, num_envs=256, seed=0)
    raw = MujocoBatch(env.model, 256, backend=env.backend, nthread=env.nthread)
    zeros = torch.zeros(256, env.num_actions)
    for _ in range(20):
        env.step(zeros)
        raw.step(env.substeps)
    t_task = best_us(lambda: env.step(zeros), n=20, reps=15)
    t_rest = best_us(lambda: raw.step(env.substeps), n=20, reps=15)
    blocks = []
    for _ in range(15):
        raw.state[:] = env.sim.state
        t = time.perf_counter()
        for _ in range(20):
            raw.step(env.substeps)
        blocks.append((time.perf_counter() - t) / 20)
        for _ in range(20):
            env.step(zeros)
    t_from = min(blocks) * 1e6
    print(f"{task}: task step {t_task:.0f} us; raw from rest {t_rest:.0f} us (ratio "
          f"{t_rest / t_task:.2f}); raw from the task's states {t_from:.0f} us (ratio "
          f"{t_from / t_task:.2f})")
    raw.close()
    env.close()


def main() -> None:
    for task in sys.argv[1:]:
        measure(task)


if __name__ == "__main__":
    main()
