"""Where a MuJoCo task's step goes: best-of timings of ``env.step``, a raw batch of the same
model, the task's own batch stepped alone, and ``_observe``; then a cProfile of 500 steps.
Usage: ``python -m edgerl.apps.experiments.probes.sim_profile_step TASK [ENVS]``."""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

import torch

from edgerl.sim.mujoco.backends import MujocoBatch
from edgerl.sim.registry import make_task


def best_us(fn, n: int = 200, reps: int = 5) -> float:
    """The fastest of ``reps`` blocks of ``n`` calls of ``fn``, in us per call."""
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best * 1e6


def main() -> None:
    task = sys.argv[1]
    envs = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    env = make_task(task, num_envs=envs, seed=0)
    raw = MujocoBatch(env.model, envs, backend=env.backend, nthread=env.nthread)
    zeros = torch.zeros(envs, env.num_actions)
    for _ in range(20):
        env.step(zeros)
        raw.step(env.substeps)
    t_step = best_us(lambda: env.step(zeros))
    t_raw = best_us(lambda: raw.step(env.substeps))
    t_own = best_us(lambda: env.sim.step(env.substeps))
    t_obs = best_us(env._observe)
    print(f"{task}, {envs} envs: step {t_step:.0f} us, raw batch {t_raw:.0f} us, the task's "
          f"batch alone {t_own:.0f} us, _observe {t_obs:.0f} us, ratio {t_raw / t_step:.2f}")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(500):
        env.step(zeros)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(14)
    raw.close()
    env.close()


if __name__ == "__main__":
    main()
