"""``GymView``: a gymnasium single-env view of env 0 of a 1-env task, for debugging.

``GymView("cartpole")`` builds ``make_task("cartpole", num_envs=1)`` and exposes it through the
gymnasium 1.x API (numpy float32 observations and actions, ``Box`` spaces from the task's
``TaskSpec``). ``reset(seed=s)`` re-seeds the task's generator, so seeded resets and steps are
deterministic.

The wrapped VecEnv auto-resets: the observation returned together with ``terminated`` or
``truncated`` is already the first observation of the next episode (the terminal observation
is not kept); ``info["success"]`` tells whether the episode that just ended succeeded.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from edgerl.sim.registry import make_task

__all__ = ["GymView"]


class GymView(gym.Env):
    """Gymnasium view of env 0 of a vectorized task.

    Args:
        task: Registry name (built with ``num_envs=1``) or an already built 1-env task.
        **task_kwargs: Passed to ``make_task`` (e.g. ``device``, config fields).
    """

    metadata = {"render_modes": []}

    def __init__(self, task: str | Any, **task_kwargs: Any) -> None:
        super().__init__()
        env = make_task(task, num_envs=1, **task_kwargs) if isinstance(task, str) else task
        if int(env.num_envs) != 1:
            raise ValueError(f"GymView needs a 1-env task, got num_envs={env.num_envs}")
        self.task = env
        spec = env.spec
        obs = env.get_observations()["policy"]
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(int(obs.shape[-1]),),
                                                dtype=np.float32)
        self.action_space = gym.spaces.Box(np.asarray(spec.action_low, dtype=np.float32),
                                           np.asarray(spec.action_high, dtype=np.float32),
                                           dtype=np.float32)

    def _obs(self, obs: Any) -> np.ndarray:
        return obs["policy"][0].detach().cpu().numpy().astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.task.seed(seed)
        obs = self.task.reset()
        if obs is None:
            obs = self.task.get_observations()
        return self._obs(obs), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        act = np.asarray(action, dtype=np.float32).reshape(1, -1)
        t = torch.as_tensor(act, device=torch.device(self.task.device))
        obs, rew, dones, extras = self.task.step(t)
        time_out = bool(extras.get("time_outs", torch.zeros(1, dtype=torch.bool))[0])
        done = bool(dones[0])
        success = extras.get("success")
        info = {"success": bool(success[0]) if success is not None else False}
        return self._obs(obs), float(rew[0]), done and not time_out, time_out, info

    def close(self) -> None:
        self.task.close()
