"""A MuJoCo backend's raw rate: the limit a task's own step rate is reported against.

:func:`raw_steps_per_s` times a backend alone (zero control, no task logic); the MuJoCo tasks'
``raw_physics_steps_per_s`` calls it, so ``edgerl bench sim`` reports a task's overhead as a
ratio of two rates measured in the same minutes.
"""

from __future__ import annotations

import time

import mujoco

from edgerl.sim.mujoco.backends import MujocoBatch
from edgerl.sim.mujoco.warp import WarpBatch

__all__ = ["raw_steps_per_s"]


def raw_steps_per_s(model: mujoco.MjModel, num_envs: int, steps: int, nsubsteps: int,
                    backend: str = "batch", nthread: int = 2, warmup: int = 5) -> float:
    """Backend-only throughput: control steps (each ``nsubsteps`` physics steps) per second
    summed over envs, with zero control and no task logic. Used as ``edgerl bench sim``'s
    ``raw_physics_steps_per_s`` so the task's overhead is a ratio."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    sim: MujocoBatch | WarpBatch
    sim = (WarpBatch(model, num_envs) if backend == "warp"
           else MujocoBatch(model, num_envs, backend=backend, nthread=nthread))
    try:
        for _ in range(warmup):
            sim.step(nsubsteps)
        start = time.perf_counter()
        for _ in range(steps):
            sim.step(nsubsteps)
        elapsed = time.perf_counter() - start
    finally:
        sim.close()
    return num_envs * steps / elapsed
