"""The CPU backends compared on edgerl's MuJoCo tasks (docs/benchmarks.md).

:func:`measure_task` times a task's full ``step`` beside its raw backend
(:func:`edgerl.sim.mujoco.raw_rate.raw_steps_per_s`, ``edgerl bench sim``'s
``raw_physics_steps_per_s``), so a task's overhead is a ratio.
``python -m edgerl.bench.sim.mujoco_backends`` prints the table.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from edgerl.sim.mujoco.backends import BACKENDS

__all__ = ["main", "measure_task"]


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

    from edgerl.contract.logs import progress
    from edgerl.contract.report import print_json, print_table

    p = argparse.ArgumentParser(prog="python -m edgerl.bench.sim.mujoco_backends",
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
