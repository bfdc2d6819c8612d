"""Per-task training defaults: env count, rollout length and PPO settings by device.

``edgerl train TASK`` fills every flag the user did not give (``--num-envs``,
``--steps-per-env``, ``--learning-rate``, ``--mini-batches``) from :func:`task_defaults`.

On the CPU the fastest time to a solved task comes from fewer, larger updates: the PPO update
(epochs x minibatches of backward passes through two MLPs) costs more than stepping a cheap
task, so a tuned task collects a batch of a similar size with fewer minibatches and a larger
learning rate (the adaptive KL schedule still bounds each step). Measured as time to 0.95
training success against :data:`BASELINE` in the same run: ``benchmarks/time_to_solve.py``,
docs/benchmarks.md. On a GPU the env count is what is cheap, so :data:`GPU_DEFAULTS` keeps
thousands of envs (the usual rsl_rl / Isaac Lab sizes).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from edgerl.policies.config import TrainConfig

__all__ = ["BASELINE", "CPU_DEFAULTS", "GPU_DEFAULTS", "TaskDefaults", "apply_task_defaults",
           "task_defaults"]


@dataclass(frozen=True)
class TaskDefaults:
    """Training sizes of one task on one kind of device.

    Attributes:
        num_envs: Parallel envs.
        num_steps_per_env: Rollout steps per env per PPO iteration.
        learning_rate: PPO's initial learning rate (adaptive schedule).
        num_mini_batches: Minibatches per PPO epoch.
        num_learning_epochs: Passes over each rollout.
    """

    num_envs: int = 64
    num_steps_per_env: int = 32
    learning_rate: float = 1e-3
    num_mini_batches: int = 4
    num_learning_epochs: int = 5

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: The configuration before per-task tuning (and the fallback for untuned tasks on the CPU).
BASELINE = TaskDefaults()

#: Tuned for the time to 0.95 training success on a 2-core CPU (``--threads 1``).
CPU_DEFAULTS: dict[str, TaskDefaults] = {
    # time to 0.95 (median of 3 seeds, process CPU s): 1.34 vs BASELINE's 3.34 (2026-12-01)
    "cartpole": TaskDefaults(num_envs=128, num_steps_per_env=16, learning_rate=3e-3,
                             num_mini_batches=1, num_learning_epochs=2),
    # ball_balance keeps BASELINE: its MuJoCo physics and success-at-episode-end make env
    # steps the cost, and every candidate tried (2026-12-01, 2 seeds, loaded machine) needed
    # more process CPU to 0.95 than BASELINE's 21.6 s: 128x16 lr 3e-3 1 minibatch 2 epochs
    # 35.1 s, 256x8 (BASELINE's update) 45.1 s, 64x32 lr 2e-3 2 minibatches 4 epochs 28.8 s.
}

#: GPU sizes: many envs, short rollouts (``--device cuda``).
GPU_DEFAULTS: dict[str, TaskDefaults] = {
    "*": TaskDefaults(num_envs=4096, num_steps_per_env=24, learning_rate=1e-3,
                      num_mini_batches=4),
}


def task_defaults(task: str, device: str = "cpu") -> TaskDefaults:
    """The defaults of ``task`` on ``device`` (CUDA: :data:`GPU_DEFAULTS`; CPU:
    :data:`CPU_DEFAULTS`, else :data:`BASELINE`)."""
    if torch.device(device).type == "cuda":
        return GPU_DEFAULTS.get(task, GPU_DEFAULTS["*"])
    return CPU_DEFAULTS.get(task, BASELINE)


def apply_task_defaults(cfg: TrainConfig, defaults: TaskDefaults | None = None,
                        keep: tuple[str, ...] = ()) -> TrainConfig:
    """A copy of ``cfg`` with the task's defaults (or ``defaults``) in every field except
    those named in ``keep`` (``num_envs``, ``num_steps_per_env``, ``learning_rate``,
    ``num_mini_batches``, ``num_learning_epochs``), which keep ``cfg``'s values."""
    d = defaults or task_defaults(cfg.task, cfg.device)
    top = {k: getattr(d, k) for k in ("num_envs", "num_steps_per_env") if k not in keep}
    ppo = {k: getattr(d, k) for k in ("learning_rate", "num_mini_batches", "num_learning_epochs")
           if k not in keep}
    return replace(cfg, **top, ppo=replace(cfg.ppo, **ppo))
