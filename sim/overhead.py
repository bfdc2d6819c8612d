"""Task overhead against raw physics, robust to other load: interleaved best-of blocks.

:func:`overhead_ratio` times blocks of ``env.step`` (zero actions, auto-resets included) and,
right after each, blocks of the same backend stepping a second, persistent batch of the same
model (same env count, substeps, threads; zero control, no task logic), alternating
``blocks`` times. Other processes only ever slow a block down, so each side's fastest block is
its least-disturbed estimate and the ratio of the two bests is the task's overhead on a quiet
machine (``edgerl bench ratios``' ``sim/<task>``; the acceptance is >= 0.75 for every MuJoCo
task). Medians are reported beside them.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import torch

__all__ = ["overhead_ratio"]


def overhead_ratio(task: str, num_envs: int = 256, steps: int = 20, blocks: int = 15,
                   warmup: int = 10, seed: int = 0) -> dict[str, Any]:
    """Env-steps/s of ``task`` and of its raw backend, best and median of ``blocks``
    interleaved blocks of ``steps`` control steps each; ``ratio`` = best / best."""
    from edgerl.sim.mujoco.backends import MujocoBatch
    from edgerl.sim.registry import make_task

    if min(num_envs, steps, blocks) < 1:
        raise ValueError("num_envs, steps and blocks must be >= 1")
    env = make_task(task, num_envs=num_envs, seed=seed)
    if not hasattr(env, "sim") or not hasattr(env, "substeps"):
        env.close()
        raise ValueError(f"{task} is not a MuJoCo task (no batch to compare with)")
    raw = MujocoBatch(env.model, num_envs, backend=env.backend, nthread=env.nthread)
    zeros = torch.zeros(num_envs, env.num_actions)
    ours, ref = [], []
    try:
        for _ in range(warmup):
            env.step(zeros)
            raw.step(env.substeps)
        for _ in range(blocks):
            start = time.perf_counter()
            for _ in range(steps):
                env.step(zeros)
            mid = time.perf_counter()
            for _ in range(steps):
                raw.step(env.substeps)
            end = time.perf_counter()
            ours.append(num_envs * steps / (mid - start))
            ref.append(num_envs * steps / (end - mid))
    finally:
        raw.close()
        env.close()
    return {"task": task, "num_envs": num_envs, "steps": steps, "blocks": blocks,
            "steps_per_s": round(max(ours)), "raw_physics_steps_per_s": round(max(ref)),
            "ratio": round(max(ours) / max(ref), 3),
            "median_steps_per_s": round(statistics.median(ours)),
            "median_raw_steps_per_s": round(statistics.median(ref)),
            "median_pair_ratio": round(statistics.median(o / r for o, r in zip(ours, ref)), 3)}
