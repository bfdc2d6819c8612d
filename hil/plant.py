"""The plant stage of a HIL run: one env of the simulated task, owned by the harness. It is
made for the run's seed (and the bundle's task arguments), checked against the wire schema,
stepped every control period with the command the firmware applied, and read off as the
numpy observation the harness writes into the firmware's sensor HAL."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from edgerl.contract.wire import MAX_CMD, MAX_STATE

__all__ = ["HilPlant", "StepResult", "plant_task"]


def plant_task(task: str | None, bundle: Path | None) -> str:
    """The run's task: ``task`` if given, else the bundle's, else ``cartpole``."""
    return task or _bundle_task(bundle) or "cartpole"


def _bundle_task(bundle: Path | None) -> str | None:
    if bundle is None:
        return None
    from edgerl.contract.spec import load_bundle_manifest

    return load_bundle_manifest(bundle, verify=False).task or None


class StepResult(NamedTuple):
    """One plant step: the next observation (``obs_dim``,), the reward, whether the episode
    ended (the plant then reset itself: ``obs`` is the next episode's first) and, when it
    did, whether it ended in success."""

    obs: np.ndarray
    reward: float
    done: bool
    success: bool


class HilPlant:
    """One env of ``task`` (seeded ``seed``; a bundle's ``extra.task_kwargs`` applied).

    Attributes:
        env: The task's vectorised env (one env); the gated planner's expert reads it.
        task: Task name. rate: Control rate (Hz). period: Control period (s).
        n_cmd: Command size. obs_dim: Observation size.
        lock: Held while the plant steps (the gated planner's expert pickles the plant
            under it); a no-op lock until :meth:`share`.
    """

    def __init__(self, task: str, seed: int, bundle: Path | None = None) -> None:
        from edgerl.hil.gate import bundle_task_kwargs
        from edgerl.sim.registry import make_task

        self.task = task
        self.env = make_task(task, num_envs=1, seed=seed, **bundle_task_kwargs(bundle))
        self.rate = float(self.env.spec.control_hz)
        self.period = 1.0 / self.rate
        self.n_cmd = int(self.env.num_actions)
        #: the largest |command| the task's action limits allow (the firmware's SETPOINT bound)
        spec = self.env.spec
        self.cmd_limit = float(max(max(abs(v) for v in spec.action_low),
                                   max(abs(v) for v in spec.action_high)))
        self.obs_dim = int(self.env.get_observations()["policy"].shape[-1])
        if self.n_cmd > MAX_CMD or self.obs_dim > MAX_STATE:
            raise ValueError(f"task {task!r}: {self.n_cmd} actions / {self.obs_dim} "
                             f"observations exceed the wire schema's MAX_CMD={MAX_CMD} / "
                             f"MAX_STATE={MAX_STATE}")
        self.lock: Any = contextlib.nullcontext()

    def share(self, lock: Any) -> None:
        """Step under ``lock`` from now on (another thread reads the plant under it)."""
        self.lock = lock

    def max_steps(self, cap: int | None) -> int:
        """Control steps per episode: ``cap``, else the task's episode length."""
        return int(cap or self.env.max_episode_length)

    def observation(self) -> np.ndarray:
        """The current observation, (``obs_dim``,) float32."""
        return self.env.get_observations()["policy"][0].numpy()

    def step(self, cmd: np.ndarray) -> StepResult:
        """Apply ``cmd`` (``n_cmd``,) for one control period (under :attr:`lock`)."""
        import torch

        with self.lock:
            _, rew, dones, extras = self.env.step(torch.as_tensor(cmd[None, :],
                                                                  dtype=torch.float32))
            obs = self.observation()
        done = bool(dones[0])
        return StepResult(obs, float(rew[0]), done,
                          done and bool(extras["success"][0]))

    def reset(self) -> None:
        """Start a new episode (after one reached its step cap)."""
        self.env.reset()
