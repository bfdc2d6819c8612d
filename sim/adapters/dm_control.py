"""Any dm_control suite task as an edgerl :class:`EdgeVecEnv` (task family ``dmc:``).

>>> env = DmcVecEnv("reacher-easy", num_envs=8, seed=0)   # or make_task("dmc:reacher-easy")
>>> env.spec.obs_names[:4], env.spec.control_hz, env.spec.max_episode_steps
(['position[0]', 'position[1]', 'to_target[0]', 'to_target[1]'], 50.0, 1000)

``dmc:<domain>-<task>`` names a task of ``dm_control.suite`` (``dmc:reacher-easy``,
``dmc:finger-turn_easy``, ``dmc:cheetah-run``). ``num_envs`` independent dm_control
environments step in one loop (they are cheap: a reacher step is ~40 us).

Semantics (the same as the gymnasium adapter's, which the latency wrappers and PPO rely on):

* Observations: the ordered dict of the task's observation spec, flattened in spec order to
  ``(num_envs, O)`` float32; element names are ``key[i]`` (``key`` for a scalar), so a split
  names the goal by key: ``planner_only=["to_target"]`` hides every element of ``to_target``.
* Actions: the bounded action spec; commands are clipped to it.
* Time: ``control_hz = 1 / env.control_timestep()``; an episode lasts the task's time limit
  (``max_episode_steps``). The last step of an episode has ``dones = 1``; it is a time-out
  (``extras["time_outs"]``, PPO bootstraps) when dm_control's discount stays 1, a termination
  when it is 0. Same-step reset: the observation returned for a finished env is the first of
  its next episode; :attr:`DmcVecEnv.final_obs` keeps the last one.
* ``extras["success"]``: dm_control has no success flag; an episode counts as a success when
  its mean reward is at least ``success_reward`` (default 0.5, of the suite's 0..1 reward).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from edgerl.sim.adapters.expert import EXPERT_RUN_HOW, clipped_expert_action, resolve_expert
from edgerl.sim.task_info import TaskInfo, describe_built
from edgerl.sim.vec_env import EdgeVecEnv, TaskSpec

__all__ = ["DMC_PREFIX", "DmcAdapterError", "DmcVecEnv", "describe_dmc_task", "make_dmc_task"]

log = logging.getLogger(__name__)

#: Task-name prefix of the dm_control family: ``dmc:<domain>-<task>``.
DMC_PREFIX = "dmc:"


class DmcAdapterError(ValueError):
    """The dm_control task cannot be adapted (unknown name, unbounded actions, ...)."""


def _suite() -> Any:
    try:
        from dm_control import suite
    except ImportError as exc:
        raise DmcAdapterError("dm_control is not installed: pip install 'edgerl[sim]'") from exc
    return suite


def split_name(name: str) -> tuple[str, str]:
    """``"dmc:reacher-easy"`` or ``"reacher-easy"`` -> ``("reacher", "easy")``."""
    body = name[len(DMC_PREFIX):] if name.startswith(DMC_PREFIX) else name
    domain, sep, task = body.partition("-")
    if not sep or not domain or not task:
        raise DmcAdapterError(f"dm_control task names look like 'dmc:<domain>-<task>' "
                              f"(e.g. dmc:reacher-easy), got {name!r}")
    return domain, task


def observation_names(obs_spec: dict[str, Any]) -> list[str]:
    """Element names of a flattened dm_control observation: ``key[i]``, or ``key`` for a
    scalar, in the spec's order."""
    names: list[str] = []
    for key, spec in obs_spec.items():
        size = int(np.prod(spec.shape)) if spec.shape else 1
        names += [key] if not spec.shape else [f"{key}[{i}]" for i in range(size)]
    return names


def expand_planner_only(items: list[int | str], obs_names: list[str]) -> list[str]:
    """``planner_only`` entries as element names: an int indexes the observation, a full
    element name stands for itself, a key (``"to_target"``) for all of its elements."""
    out: list[str] = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool):
            if not 0 <= item < len(obs_names):
                raise DmcAdapterError(f"planner_only index {item} is outside the observation "
                                      f"(0..{len(obs_names) - 1})")
            out.append(obs_names[item])
            continue
        matches = ([item] if item in obs_names else
                   [n for n in obs_names if n.startswith(f"{item}[")])
        if not isinstance(item, str) or not matches:
            raise DmcAdapterError(f"planner_only entry {item!r} is neither an index, an element "
                                  f"nor a key of the observation ({', '.join(obs_names)})")
        out += [m for m in matches if m not in out]
    return out


class DmcVecEnv(EdgeVecEnv):
    """``num_envs`` dm_control suite environments behind edgerl's / rsl_rl's VecEnv interface.

    Args:
        task: ``"<domain>-<task>"`` (with or without the ``dmc:`` prefix).
        num_envs: Environments (env ``i`` is seeded ``seed + i``).
        device: Torch device of every returned tensor.
        seed: Seed of env 0.
        planner_only: Observation elements only the planner sees (indices, element names or
            observation keys).
        expert: ``(N, O) -> (N, A)`` callable, or a ``nodelay`` run directory (see
            :class:`edgerl.sim.adapters.expert.RunExpert`); used by ``expert_action``.
        success_reward: Mean reward per step above which an episode counts as a success.
        name: Task name in the spec (default ``dmc:<domain>-<task>``).
    """

    def __init__(self, task: str, num_envs: int = 1, device: torch.device | str = "cpu",
                 seed: int = 0, *, planner_only: list[int | str] | None = None,
                 expert: Callable[[torch.Tensor], torch.Tensor] | str | Path | None = None,
                 success_reward: float = 0.5, name: str | None = None) -> None:
        suite = _suite()
        domain, task_name = split_name(task)
        if (domain, task_name) not in suite.ALL_TASKS:
            known = ", ".join(f"{d}-{t}" for d, t in suite.ALL_TASKS)
            raise DmcAdapterError(f"dm_control has no task {domain}-{task_name}; known: {known}")
        if num_envs < 1:
            raise DmcAdapterError(f"num_envs must be >= 1, got {num_envs}")
        self.device = torch.device(device)
        self.num_envs = int(num_envs)
        self.envs = [suite.load(domain, task_name, task_kwargs={"random": int(seed) + i})
                     for i in range(self.num_envs)]
        self.success_reward = float(success_reward)
        self.spec = self._build_spec(name or f"{DMC_PREFIX}{domain}-{task_name}",
                                     planner_only or [])
        self.num_actions = self.spec.action_dim
        self.max_episode_length = self.spec.max_episode_steps
        self.cfg = {"task": f"{domain}-{task_name}", "num_envs": self.num_envs}
        self._low = torch.tensor(self.spec.action_low, dtype=torch.float32, device=self.device)
        self._high = torch.tensor(self.spec.action_high, dtype=torch.float32,
                                  device=self.device)
        self._expert = resolve_expert(expert, self.spec.obs_dim, self.spec.action_dim, self.device)
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long,
                                              device=self.device)
        self.final_obs = torch.zeros(self.num_envs, self.spec.obs_dim, device=self.device)
        self._reward_sum = np.zeros(self.num_envs, dtype=np.float64)
        self.seed(seed)
        self._obs = self._stack([env.reset().observation for env in self.envs])

    def _build_spec(self, name: str, planner_only: list[int | str]) -> TaskSpec:
        env = self.envs[0]
        act = env.action_spec()
        low = [float(x) for x in np.broadcast_to(act.minimum, act.shape).reshape(-1)]
        high = [float(x) for x in np.broadcast_to(act.maximum, act.shape).reshape(-1)]
        if not all(np.isfinite(low + high)):
            raise DmcAdapterError(f"{name}: the action spec is unbounded ({low}..{high})")
        obs_names = observation_names(env.observation_spec())
        dt = float(env.control_timestep())
        steps = int(round(float(env._step_limit))) if np.isfinite(env._step_limit) else 1000
        return TaskSpec(name=name, obs_names=obs_names, obs_units=[""] * len(obs_names),
                        action_names=[f"act{i}" for i in range(len(low))],
                        action_units=[""] * len(low), action_low=low, action_high=high,
                        control_hz=1.0 / dt, max_episode_steps=steps,
                        planner_only=expand_planner_only(planner_only, obs_names))

    def _flat(self, observation: dict[str, Any]) -> np.ndarray:
        return np.concatenate([np.asarray(v, dtype=np.float32).reshape(-1)
                               for v in observation.values()])

    def _stack(self, observations: list[dict[str, Any]]) -> torch.Tensor:
        arr = np.stack([self._flat(o) for o in observations])
        return torch.from_numpy(arr).to(self.device)

    # --- VecEnv ---------------------------------------------------------------------------
    def get_observations(self) -> TensorDict:
        return TensorDict({"policy": self._obs}, batch_size=[self.num_envs], device=self.device)

    def _step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        clipped = torch.maximum(torch.minimum(actions.to(self.device), self._high), self._low)
        act = clipped.detach().cpu().numpy().astype(np.float64)
        rewards = np.zeros(self.num_envs, dtype=np.float32)
        done = np.zeros(self.num_envs, dtype=bool)
        time_out = np.zeros(self.num_envs, dtype=bool)
        success = np.zeros(self.num_envs, dtype=bool)
        observations = []
        for i, env in enumerate(self.envs):
            ts = env.step(act[i])
            rewards[i] = float(ts.reward or 0.0)
            self._reward_sum[i] += rewards[i]
            if ts.last():
                done[i] = True
                time_out[i] = ts.discount is None or float(ts.discount) > 0.0
                steps = int(self.episode_length_buf[i]) + 1
                success[i] = self._reward_sum[i] / steps >= self.success_reward
                self.final_obs[i] = torch.from_numpy(self._flat(ts.observation)).to(self.device)
                self._reward_sum[i] = 0.0
                ts = env.reset()
            observations.append(ts.observation)
        self._obs = self._stack(observations)
        done_t = torch.from_numpy(done).to(self.device)
        self.episode_length_buf += 1
        self.episode_length_buf[done_t] = 0
        extras = {"time_outs": torch.from_numpy(time_out & done).to(self.device),
                  "success": torch.from_numpy(success).to(self.device), "log": {}}
        return (self.get_observations(), torch.from_numpy(rewards).to(self.device),
                done_t.long(), extras)

    def reset(self, env_ids: torch.Tensor | None = None) -> TensorDict:
        """Reset ``env_ids`` (all when ``None``) and return the observations."""
        ids = (range(self.num_envs) if env_ids is None
               else torch.as_tensor(env_ids).cpu().tolist())
        for i in ids:
            self._obs[i] = torch.from_numpy(self._flat(self.envs[i].reset().observation)).to(
                self.device)
            self.episode_length_buf[i] = 0
            self._reward_sum[i] = 0.0
        return self.get_observations()

    # --- edgerl additions -----------------------------------------------------------------
    def expert_action(self) -> torch.Tensor:
        """The expert's action for the current observations, (N, A), within the limits."""
        return clipped_expert_action(self._expert, self._obs, self.spec.name, EXPERT_RUN_HOW,
                                     self.device, self._low, self._high)

    def close(self) -> None:
        for env in self.envs:
            env.close()


def describe_dmc_task(name: str) -> TaskInfo:
    """The registry's :class:`TaskInfo` for ``dmc:<domain>-<task>`` (builds the task once)."""
    return describe_built(name, lambda: DmcVecEnv(name, num_envs=1), DmcAdapterError,
                          "dm_control", f"dm_control suite task {name[len(DMC_PREFIX):]} "
                          "(edgerl.sim.adapters)",
                          "edgerl.sim.adapters.dm_control:make_dmc_task")


def make_dmc_task(name: str, num_envs: int = 1, device: str = "cpu", seed: int = 0,
                  expert_run: str | None = None, **kwargs: Any) -> DmcVecEnv:
    """Registry factory of ``dmc:<domain>-<task>``: ``expert_run`` is a ``nodelay`` run
    directory; other keyword arguments go to :class:`DmcVecEnv` (``planner_only``, ...)."""
    return DmcVecEnv(name, num_envs=num_envs, device=device, seed=seed, expert=expert_run,
                     name=name, **kwargs)
