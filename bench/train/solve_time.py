"""Time to a solved task: today's training configuration against a tuned one, in one run.

:func:`time_to_success` trains one configuration with ``stop_at_success`` and reads, from the
metrics rows, the training-loop time (``time_s``) and env steps at the first iteration whose
training success rate (last 100 episodes, at least 20) reached the target. :func:`compare_solve`
runs the reference (:data:`edgerl.policies.task_defaults.BASELINE`) and the task's tuned
defaults interleaved per seed (reference, tuned, reference, ...), so both see the same machine
load; the speed-up is the ratio of the median times. ``benchmarks/time_to_solve.py`` is the
command line.
"""

from __future__ import annotations

import logging
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from edgerl.policies.config import TrainConfig
from edgerl.policies.task_defaults import BASELINE, TaskDefaults, apply_task_defaults, task_defaults

__all__ = ["budget_config", "candidate_config", "compare_solve", "time_to_success"]

log = logging.getLogger(__name__)


def time_to_success(cfg: TrainConfig, target: float = 0.95) -> dict[str, Any]:
    """Train ``cfg`` (nothing kept) until the success rate reaches ``target`` or
    ``cfg.iterations`` run out.

    Returns ``{"solved", "time_s", "cpu_s", "env_steps", "iterations", "wall_s"}``: the
    training loop's wall and process CPU seconds (all threads) and env steps at the first
    iteration that reached ``target`` (``None`` when none did);
    ``wall_s`` is the whole :func:`~edgerl.policies.train.train` call (env construction and
    writes included).
    """
    from edgerl.policies.train import train

    cfg = replace(cfg, stop_at_success=target)
    with tempfile.TemporaryDirectory(prefix="edgerl-solve-") as tmp:
        result = train(cfg, out=Path(tmp) / "run", show_progress=False)
    hit = next((row for row in result.history
                if row["success_rate"] is not None and row["success_rate"] >= target), None)
    return {"solved": hit is not None, "time_s": None if hit is None else hit["time_s"],
            "cpu_s": None if hit is None else hit.get("cpu_s"),
            "env_steps": None if hit is None else hit["env_steps"],
            "iterations": len(result.history), "wall_s": round(result.wall_s, 3)}


def budget_config(task: str, seed: int, defaults: TaskDefaults, budget: int,
                  method: str = "nodelay", device: str = "cpu") -> TrainConfig:
    """A :class:`TrainConfig` with ``defaults`` (nothing kept) and as many iterations as fit
    in ``budget`` env steps (rounded up to whole iterations of ``defaults``' batch)."""
    batch = defaults.num_envs * defaults.num_steps_per_env
    cfg = TrainConfig(task=task, method=method, seed=seed, device=device,
                      iterations=max(1, -(-budget // batch)))
    return apply_task_defaults(cfg, defaults)


def candidate_config(task: str, seed: int, spec: dict[str, Any], budget: int) -> TrainConfig:
    """One grid candidate (``benchmarks/solve_time_grid.py``): ``spec`` holds
    :class:`TaskDefaults` fields (the rest are :data:`BASELINE`'s), plus optional ``"ppo"``
    (other ``PPOConfig`` fields) and ``"actor"`` (``ModelConfig`` fields of the actor); a
    ``nodelay`` config capped at ``budget`` env steps. Unknown fields raise ``TypeError``."""
    spec = dict(spec)
    ppo, actor = spec.pop("ppo", {}), spec.pop("actor", {})
    if spec.get("hidden_dims") is not None:
        spec["hidden_dims"] = tuple(spec["hidden_dims"])
    cfg = budget_config(task, seed, TaskDefaults(**{**BASELINE.to_dict(), **spec}), budget)
    return replace(cfg, ppo=replace(cfg.ppo, **ppo), actor=replace(cfg.actor, **actor))


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return None if len(known) < len(values) or not known else statistics.median(known)


def compare_solve(task: str, seeds: list[int], iterations: int = 200, target: float = 0.95,
                  method: str = "nodelay", tuned: TaskDefaults | None = None,
                  reference: TaskDefaults = BASELINE, device: str = "cpu") -> dict[str, Any]:
    """Time to ``target`` of ``reference`` and ``tuned`` (default: the task's defaults), both
    capped at the same env-step budget (``iterations`` of the reference's batch), interleaved
    per seed. ``speedup`` = median reference time / median tuned time, ``cpu_speedup`` the same
    in process CPU seconds (less sensitive to other load); ``None`` when a run did not
    solve."""
    tuned = tuned or task_defaults(task, device)
    budget = iterations * reference.num_envs * reference.num_steps_per_env
    runs: dict[str, list[dict[str, Any]]] = {"reference": [], "tuned": []}
    for seed in seeds:
        for name, defaults in (("reference", reference), ("tuned", tuned)):
            cfg = budget_config(task, seed, defaults, budget, method, device)
            row = {"seed": seed, **time_to_success(cfg, target)}
            runs[name].append(row)
            log.info("%s %s seed %d: %s", task, name, seed, row)
    ref_t = _median([r["time_s"] for r in runs["reference"]])
    tun_t = _median([r["time_s"] for r in runs["tuned"]])
    ref_c = _median([r["cpu_s"] for r in runs["reference"]])
    tun_c = _median([r["cpu_s"] for r in runs["tuned"]])
    return {"task": task, "method": method, "target": target, "seeds": list(seeds),
            "device": device, "reference_cfg": reference.to_dict(), "tuned_cfg": tuned.to_dict(),
            "reference_time_s": ref_t, "tuned_time_s": tun_t,
            "speedup": None if ref_t is None or not tun_t else round(ref_t / tun_t, 3),
            "reference_cpu_s": ref_c, "tuned_cpu_s": tun_c,
            "cpu_speedup": None if ref_c is None or not tun_c else round(ref_c / tun_c, 3),
            "reference_env_steps": _median([r["env_steps"] for r in runs["reference"]]),
            "tuned_env_steps": _median([r["env_steps"] for r in runs["tuned"]]),
            "runs": runs}
