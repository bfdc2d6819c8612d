"""Raw MuJoCo throughput and the backend comparison CLI.

:func:`raw_steps_per_s` times a backend alone (zero control, no task logic): it is
``edgerl bench sim``'s ``raw_physics_steps_per_s``, so a task's overhead is a ratio.
``python -m edgerl.sim.mujoco.bench`` compares the CPU backends on edgerl's MuJoCo tasks
(docs/benchmarks.md).
"""

from __future__ import annotations

import time
from typing import Any

import mujoco
import numpy as np
import torch

from edgerl.sim.mujoco.backends import BACKENDS, MujocoBatch
from edgerl.sim.mujoco.warp import WarpBatch

__all__ = ["main", "measure_task", "raw_steps_per_s"]


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


def measure_task(task: str, num_envs: int, steps: int, backend: str, nthread: int = 2,
                 repeats: int = 5) -> dict[str, Any]:
    """Full ``step`` rate (zero actions) and raw backend rate of a registered MuJoCo task,
    measured back to back ``repeats`` times; medians (rates in env-steps/s summed over envs,
    and the median of the per-pair ratios, which is robust to load from other processes)."""
    from edgerl.sim.registry import make_task

    env = make_task(task, num_envs=num_envs, seed=0, backend=backend, nthread=nthread)
    step_rates, raw_rates, ratios = [], [], []
    try:
        zeros = torch.zeros(num_envs, env.num_actions)
        for _ in range(5):
            env.step(zeros)
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(steps):
                env.step(zeros)
            step_rates.append(num_envs * steps / (time.perf_counter() - start))
            raw_rates.append(env.raw_physics_steps_per_s(num_envs, steps))
            ratios.append(step_rates[-1] / raw_rates[-1])
    finally:
        env.close()
    return {"task": task, "backend": backend, "num_envs": num_envs, "nthread": nthread,
            "steps_per_s": round(float(np.median(step_rates))),
            "raw_physics_steps_per_s": round(float(np.median(raw_rates))),
            "ratio": round(float(np.median(ratios)), 3),
            "best_steps_per_s": round(max(step_rates))}


def main(argv: list[str] | None = None) -> int:
    """Compare the CPU backends on edgerl's MuJoCo tasks (table, or ``--json``)."""
    import argparse

    from edgerl.logs import progress
    from edgerl.report import print_json, print_table

    p = argparse.ArgumentParser(prog="python -m edgerl.sim.mujoco.bench",
                                description=main.__doc__)
    p.add_argument("--tasks", default="arm_reach,ball_balance")
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--nthread", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    from edgerl.sim.registry import list_tasks

    mujoco_tasks = [t.name for t in list_tasks() if t.backend == "mujoco"]
    for task in args.tasks.split(","):
        if task not in mujoco_tasks:
            p.error(f"unknown MuJoCo task {task!r}; known: {', '.join(mujoco_tasks)}")
    for backend in args.backends.split(","):
        if backend not in BACKENDS:
            p.error(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
    if args.num_envs < 1 or args.steps < 1 or args.repeats < 1:
        p.error("--num-envs, --steps and --repeats must be >= 1")
    rows = []
    combos = [(t, b) for t in args.tasks.split(",") for b in args.backends.split(",")]
    for task, backend in progress(combos, total=len(combos), desc="measuring"):
        steps = args.steps if backend != "loop" else max(args.steps // 5, 1)
        rows.append(measure_task(task, args.num_envs, steps, backend, args.nthread,
                                 args.repeats))
    if args.json:
        print_json(rows)
    else:
        print_table(rows, title="MuJoCo backends (env-steps/s, medians of back-to-back pairs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
