"""Per-task training defaults: env count, rollout length and PPO settings by device.

``edgerl train TASK`` fills every flag the user did not give (``--num-envs``,
``--steps-per-env``, ``--learning-rate``, ``--mini-batches``) from :func:`task_defaults`, and
takes the epochs and, where a task sets them, the MLP sizes, ``gamma`` and ``desired_kl``
(which have no flags) from it too.

On the CPU the fastest time to a solved task comes from fewer env steps and cheaper updates:
the PPO update (epochs x minibatches of backward passes through two MLPs) costs more than
stepping a cheap task, so a tuned task collects a batch of a similar size with fewer
minibatches and a larger learning rate (the adaptive KL schedule still bounds each step), or
uses smaller networks; a discount matched to the task's time scale (``gamma``) cuts the env
steps. The reward and the success definition are the task's, untouched. Measured as time to 0.95
training success against :data:`BASELINE` in the same run
(``python -m edgerl.apps.experiments.probes.time_to_solve``, docs/benchmarks.md). On a GPU
the env count is what is cheap, so :data:`GPU_DEFAULTS` keeps thousands of envs (the usual
rsl_rl / Isaac Lab sizes).
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
        hidden_dims: Hidden sizes of the actor and the critic MLPs; ``None`` keeps the
            config's (:class:`~edgerl.policies.config.ModelConfig`, 128 x 128).
        desired_kl: Target KL of the adaptive learning-rate schedule; ``None`` keeps the
            config's (0.01).
        gamma: Discount per control step; ``None`` keeps the config's (0.99). An algorithm
            setting only: the reward and the success definition stay the task's.
    """

    num_envs: int = 64
    num_steps_per_env: int = 32
    learning_rate: float = 1e-3
    num_mini_batches: int = 4
    num_learning_epochs: int = 5
    hidden_dims: tuple[int, ...] | None = None
    desired_kl: float | None = None
    gamma: float | None = None

    def __post_init__(self) -> None:
        for key in ("num_envs", "num_steps_per_env", "num_mini_batches", "num_learning_epochs"):
            if getattr(self, key) < 1:
                raise ValueError(f"TaskDefaults.{key}: must be >= 1, got {getattr(self, key)}")
        if self.learning_rate <= 0 or (self.desired_kl is not None and self.desired_kl <= 0):
            raise ValueError(f"TaskDefaults: learning_rate and desired_kl must be > 0, got "
                             f"{self.learning_rate} and {self.desired_kl}")
        if self.gamma is not None and not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"TaskDefaults.gamma: must be in (0, 1], got {self.gamma}")
        if self.hidden_dims is not None and (not self.hidden_dims
                                             or min(self.hidden_dims) < 1):
            raise ValueError(f"TaskDefaults.hidden_dims: need one or more sizes >= 1, got "
                             f"{self.hidden_dims}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: The configuration before per-task tuning (and the fallback for untuned tasks on the CPU).
BASELINE = TaskDefaults()

#: Tuned for the time to 0.95 training success on a 2-core CPU (``--threads 1``).
CPU_DEFAULTS: dict[str, TaskDefaults] = {
    # short rollouts, one full-batch minibatch, 3 epochs, gamma 0.95 (an episode is 100
    # steps), 64x64 MLPs (with 128 envs and 128x128 the median was only 1.66-1.71x
    # BASELINE's CPU and slow seeds needed 70-90k env steps). Grid (2026-12-01 17:10-17:15
    # UTC, load 5.8-5.9, process CPU s to 0.95, seeds 60-67): BASELINE median 9.17, this 2.69
    # (28-49k env steps), 128 envs 64x64 init std 0.5: 3.54, this with init std 0.5: 2.96.
    "cartpole": TaskDefaults(num_envs=64, num_steps_per_env=16, learning_rate=3e-3,
                             num_mini_batches=1, num_learning_epochs=3, gamma=0.95,
                             hidden_dims=(64, 64)),
    # BASELINE's batch with a shorter discount, 64x64 MLPs and 3 epochs: balancing is
    # regulation with a dense reward, so gamma 0.95 (horizon ~20 steps, 0.4 s) halves the env
    # steps to 0.95, and smaller networks and fewer epochs make each PPO update cheaper. Grid
    # (2026-12-01, process CPU s to 0.95, load 6-8): seeds 1/2/0: BASELINE 37.6 / 39.9 / 38.4,
    # 64x64 gamma 0.95 13.3 / 16.0 / 17.6, gamma 0.95 alone 19.5 (seed 2); seeds 20/21:
    # BASELINE 38.2 / 35.7, 64x64 gamma 0.95 16.3 / 18.1, and with 3 epochs 13.7 / 15.6.
    "ball_balance": TaskDefaults(num_learning_epochs=3, hidden_dims=(64, 64), gamma=0.95),
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
    ``num_mini_batches``, ``num_learning_epochs``, ``hidden_dims``, ``desired_kl``, ``gamma``),
    which keep ``cfg``'s values; a default of ``None`` also keeps ``cfg``'s."""
    d = defaults or task_defaults(cfg.task, cfg.device)
    top = {k: getattr(d, k) for k in ("num_envs", "num_steps_per_env") if k not in keep}
    ppo = {k: getattr(d, k) for k in ("learning_rate", "num_mini_batches", "num_learning_epochs",
                                      "desired_kl", "gamma")
           if k not in keep and getattr(d, k) is not None}
    models = {}
    if d.hidden_dims is not None and "hidden_dims" not in keep:
        dims = list(d.hidden_dims)
        models = {role: replace(getattr(cfg, role), hidden_dims=dims)
                  for role in ("actor", "critic")}
    return replace(cfg, **top, ppo=replace(cfg.ppo, **ppo), **models)
