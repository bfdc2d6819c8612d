"""PPO training throughput: edgerl's trainer next to rsl-rl-lib's bare ``OnPolicyRunner``.

``edgerl bench train`` (and ``make bench``) report the trainer's env-steps/s as a ratio to its
limit measured in the same run: rsl-rl-lib 5.5.1's ``OnPolicyRunner`` on the bare registered
task (no method wrapper, ``log_dir=None``: no logging, no checkpoints) with the same env count,
rollout length, network and PPO settings. The two are timed in interleaved pairs (ours, bare,
ours, bare, ...) so load from other processes hits both alike; the reported ratio is the median
of the per-pair ratios.

"Ours" is the path ``edgerl train`` runs: the task wrapped for the method
(:func:`edgerl.policies.methods.make_method_env`), :class:`~edgerl.policies.ppo_runner.EdgeRunner`
writing ``metrics.jsonl``, TensorBoard scalars and checkpoints into a temporary run directory.
Each timed block is ``learn(iterations)`` on a freshly built runner (construction untimed);
env-steps/s = ``iterations * num_envs * steps_per_env / wall seconds``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from typing import Any

import torch

from edgerl.policies.config import TrainConfig

__all__ = ["ThroughputCfg", "bare_sps", "compare", "compare_tasks", "trainer_sps"]

log = logging.getLogger(__name__)


@dataclass
class ThroughputCfg:
    """One comparison.

    Attributes:
        task: Registered task name.
        num_envs: Parallel envs (both runners).
        steps_per_env: Rollout length per PPO iteration (both runners).
        iterations: PPO iterations per timed block.
        repeats: Interleaved (ours, bare) pairs.
        method: Our trainer's method (the bare runner always steps the plain task).
        device: Torch device.
        seed: Seed of both (every block reseeds torch).
    """

    task: str
    num_envs: int = 64
    steps_per_env: int = 32
    iterations: int = 3
    repeats: int = 3
    method: str = "nodelay"
    device: str = "cpu"
    seed: int = 0

    def __post_init__(self) -> None:
        for key in ("num_envs", "steps_per_env", "iterations", "repeats"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key}: must be >= 1, got {getattr(self, key)}")

    def train_config(self) -> TrainConfig:
        """The :class:`TrainConfig` both runners use (the task's defaults for the rest)."""
        from edgerl.policies.task_defaults import apply_task_defaults

        cfg = TrainConfig(task=self.task, method=self.method, num_envs=self.num_envs,
                          num_steps_per_env=self.steps_per_env, iterations=self.iterations,
                          device=self.device, seed=self.seed)
        return apply_task_defaults(cfg, keep=("num_envs", "num_steps_per_env"))


def _env_steps(cfg: TrainConfig) -> int:
    return cfg.iterations * cfg.num_envs * cfg.num_steps_per_env


def trainer_sps(cfg: TrainConfig) -> float:
    """Env-steps/s of ``learn(cfg.iterations)`` through edgerl's trainer (method wrapper +
    :class:`EdgeRunner` writing its run directory), construction excluded."""
    from edgerl.policies.methods import make_base_env, make_method_env
    from edgerl.policies.ppo_runner import EdgeRunner
    from edgerl.policies.train import critic_groups, scale_output_layer, seed_everything

    seed_everything(cfg.seed)
    base = make_base_env(cfg, cfg.num_envs)
    env = make_method_env(base, cfg)
    try:
        with tempfile.TemporaryDirectory(prefix="edgerl-throughput-") as run_dir:
            runner = EdgeRunner(env, cfg.rsl_rl_cfg(critic_groups(env)), log_dir=run_dir,
                                device=cfg.device, total_iterations=cfg.iterations,
                                show_progress=False)
            scale_output_layer(runner.alg.get_policy().mlp, float(cfg.actor.output_scale))
            return _timed_learn(runner, cfg)
    finally:
        env.close()


def bare_sps(cfg: TrainConfig) -> float:
    """Env-steps/s of rsl-rl-lib's own ``OnPolicyRunner`` on the bare task (same env count,
    rollout, networks and PPO settings; no logging, no checkpoints), construction excluded."""
    from rsl_rl.runners import OnPolicyRunner

    from edgerl.policies.methods import make_base_env
    from edgerl.policies.train import seed_everything

    seed_everything(cfg.seed)
    env = make_base_env(cfg, cfg.num_envs)
    try:
        rsl_cfg = cfg.rsl_rl_cfg(["policy"])
        with contextlib.redirect_stdout(io.StringIO()):  # rsl_rl prints model summaries
            runner = OnPolicyRunner(env, rsl_cfg, log_dir=None, device=cfg.device)
            return _timed_learn(runner, cfg)
    finally:
        env.close()


def _timed_learn(runner: Any, cfg: TrainConfig) -> float:
    """Env-steps/s of ``runner.learn(cfg.iterations)`` (the GPU synchronised before the stop)."""
    start = time.perf_counter()
    runner.learn(cfg.iterations)
    if torch.device(cfg.device).type == "cuda":
        torch.cuda.synchronize()
    return _env_steps(cfg) / (time.perf_counter() - start)


def compare(tc: ThroughputCfg) -> dict[str, Any]:
    """Interleaved pairs (ours, bare) of :func:`trainer_sps` / :func:`bare_sps`.

    Returns the JSON row ``edgerl bench train`` prints: medians of both rates, the median of
    the per-pair ratios (``ratio``), every pair, and the configuration.
    """
    cfg = tc.train_config()
    ours, bare, ratios = [], [], []
    for rep in range(tc.repeats):
        # alternate which runs first so a load change inside a pair favours neither
        if rep % 2 == 0:
            o = trainer_sps(cfg)
            b = bare_sps(cfg)
        else:
            b = bare_sps(cfg)
            o = trainer_sps(cfg)
        ours.append(o)
        bare.append(b)
        ratios.append(o / b)
        log.info("%s pair %d: ours %.0f, bare %.0f env-steps/s (ratio %.2f)", tc.task, rep, o,
                 b, o / b)
    return {"task": tc.task, "method": tc.method, "num_envs": tc.num_envs,
            "steps_per_env": tc.steps_per_env, "iterations": tc.iterations,
            "repeats": tc.repeats, "device": tc.device, "threads": torch.get_num_threads(),
            "mini_batches": cfg.ppo.num_mini_batches, "epochs": cfg.ppo.num_learning_epochs,
            "hidden_dims": list(cfg.actor.hidden_dims),
            "ours_steps_per_s": round(statistics.median(ours), 1),
            "bare_steps_per_s": round(statistics.median(bare), 1),
            "ratio": round(statistics.median(ratios), 3),
            "pairs": [[round(o, 1), round(b, 1)] for o, b in zip(ours, bare)]}


def compare_tasks(tasks: list[str], base: ThroughputCfg) -> list[dict[str, Any]]:
    """:func:`compare` for each task with ``base``'s other settings."""
    return [compare(replace(base, task=task)) for task in tasks]
