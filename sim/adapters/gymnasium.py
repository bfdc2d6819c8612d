"""Any gymnasium env (single or ``gymnasium.vector``) as an edgerl :class:`EdgeVecEnv`.

>>> env = GymVecEnv("InvertedPendulum-v5", num_envs=8, seed=0)   # or make_task("gym:...")
>>> env.spec.obs_names, env.spec.action_low, env.spec.control_hz
(['obs0', 'obs1', 'obs2', 'obs3'], [-3.0], 25.0)

Registered as the task family ``gym:<EnvId>`` (``edgerl train gym:InvertedPendulum-v5``).

Semantics (rsl_rl's, which the latency wrappers and PPO rely on):

* ``dones = terminated | truncated``; ``extras["time_outs"] = truncated & ~terminated`` (PPO
  bootstraps the value only on time-outs); ``extras["success"]`` = the env's ``is_success``
  info flag on the step that ended the episode (``False`` when the env has none).
* Same-step auto-reset: the observation returned for an env flagged in ``dones`` is the first
  observation of its next episode; the last observation of the finished one is kept in
  :attr:`GymVecEnv.final_obs`. gymnasium 1.x vector envs default to *next-step* auto-reset
  (the terminal observation is returned, and the env resets on the following ``step``,
  ignoring that action); the adapter builds its own vector envs in ``SAME_STEP`` mode and
  converts a user's ``NEXT_STEP`` / ``DISABLED`` vector env by resetting the finished envs
  right away with ``reset(options={"reset_mask": dones})``, so no action is ever dropped.
* Actions: continuous ``Box`` only; commands are clipped to the Box limits (or the limits
  given) before ``step``. Observations: a ``Box`` flattened to ``(num_envs, O)`` float32.
* Time: ``control_hz = 1 / env.dt`` (MuJoCo envs, classic control) unless given.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict

from edgerl.sim.adapters.expert import EXPERT_RUN_HOW, clipped_expert_action, resolve_expert
from edgerl.sim.task_info import TaskInfo, describe_built
from edgerl.sim.vec_env import EdgeVecEnv, TaskSpec

__all__ = ["GYM_PREFIX", "GymAdapterError", "GymVecEnv", "describe_gym_task", "make_gym_task",
           "resolve_device"]

log = logging.getLogger(__name__)

#: Task-name prefix of the gymnasium family: ``gym:<EnvId>``.
GYM_PREFIX = "gym:"


class GymAdapterError(ValueError):
    """The gymnasium env cannot be adapted (space type, limits, rate, env id)."""


def resolve_device(device: torch.device | str) -> torch.device:
    """``torch.device(device)``, with a clear error when CUDA is asked for but absent."""
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise GymAdapterError(f"device {str(device)!r}: CUDA is not available on this machine "
                              f"(torch {torch.__version__}, built for CUDA "
                              f"{torch.version.cuda or 'none'}); use --device cpu")
    return dev


def _gym():
    try:
        import gymnasium
    except ImportError as exc:  # pragma: no cover - gymnasium is in edgerl[sim]
        raise GymAdapterError("gymnasium is not installed: pip install 'edgerl[sim]'") from exc
    return gymnasium


def _make_vector(env: Any, num_envs: int, vectorization: str,
                 env_kwargs: dict[str, Any]) -> Any:
    """A gymnasium ``VectorEnv`` from an id, a single ``Env`` or a ``VectorEnv``."""
    gym = _gym()
    from gymnasium.vector import AutoresetMode, VectorEnv

    if isinstance(env, VectorEnv):
        return env
    if isinstance(env, gym.Env):
        if num_envs != 1:
            raise GymAdapterError(f"a single gymnasium.Env instance gives 1 env, not {num_envs};"
                                  " pass the env id (or a vector env) for more")
        return gym.vector.SyncVectorEnv([lambda: env], autoreset_mode=AutoresetMode.SAME_STEP)
    if not isinstance(env, str):
        raise GymAdapterError(f"expected a gymnasium env id, Env or VectorEnv, got "
                              f"{type(env).__name__}")
    if vectorization not in ("sync", "async"):
        raise GymAdapterError(f"vectorization must be 'sync' or 'async', got {vectorization!r}")
    try:
        return gym.make_vec(env, num_envs=num_envs, vectorization_mode=vectorization,
                            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
                            **env_kwargs)
    except gym.error.Error as exc:
        raise GymAdapterError(f"gymnasium cannot make {env!r}: {exc}") from exc


def _first_attr(vec: Any, name: str) -> Any:
    """Attribute ``name`` of sub-env 0 (``None`` when missing)."""
    try:
        return vec.get_attr(name)[0]
    except (AttributeError, IndexError, ValueError):
        return None


class GymVecEnv(EdgeVecEnv):
    """A gymnasium (vector) env behind edgerl's / rsl_rl's VecEnv interface.

    Args:
        env: A registered env id (``"InvertedPendulum-v5"``), a ``gymnasium.Env`` (1 env) or a
            ``gymnasium.vector.VectorEnv`` (any auto-reset mode).
        num_envs: Sub-environments when ``env`` is an id.
        device: Torch device of every returned tensor.
        seed: Seed of the first reset (sub-env ``i`` gets ``seed + i``).
        vectorization: ``"sync"`` (one process) or ``"async"`` (a process per env).
        control_hz: Control rate; default ``1 / env.dt`` (then ``render_fps``).
        max_episode_steps: Episode limit; default from the env's registration.
        action_low / action_high: Override (or supply, for unbounded Boxes) the action limits.
        expert: ``(N, O) -> (N, A)`` callable, or a ``nodelay`` run directory
            (:class:`edgerl.sim.adapters.expert.RunExpert`); used by ``expert_action``.
        name: Task name in the spec (default ``gym:<EnvId>``).
        env_kwargs: Extra keyword arguments for ``gymnasium.make``.
        planner_only: Observation elements only the planner sees (indices or ``obs<i>``
            names), e.g. a goal in the observation: the fast edit policy then reads the rest
            (``TaskSpec.planner_only``). Default: none, so the edit policy sees everything.
    """

    def __init__(self, env: Any, num_envs: int = 1, device: torch.device | str = "cpu",
                 seed: int = 0, *, vectorization: str = "sync", control_hz: float | None = None,
                 max_episode_steps: int | None = None,
                 action_low: list[float] | None = None, action_high: list[float] | None = None,
                 expert: Callable[[torch.Tensor], torch.Tensor] | str | Path | None = None,
                 name: str | None = None, env_kwargs: dict[str, Any] | None = None,
                 planner_only: list[int | str] | None = None) -> None:
        self.device = resolve_device(device)
        self.vec = _make_vector(env, int(num_envs), vectorization, dict(env_kwargs or {}))
        from gymnasium.vector import AutoresetMode

        self.autoreset_mode = AutoresetMode(
            self.vec.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP))
        self.num_envs = int(self.vec.num_envs)
        try:
            self.spec = self._build_spec(env, name, control_hz, max_episode_steps, action_low,
                                         action_high, planner_only or [])
        except Exception:
            self.vec.close()  # async sub-processes must not outlive a refused configuration
            raise
        self.num_actions = self.spec.action_dim
        self.max_episode_length = self.spec.max_episode_steps
        self.cfg = {"env": env if isinstance(env, str) else type(env).__name__,
                    "num_envs": self.num_envs, "autoreset_mode": self.autoreset_mode.value}
        self._low = torch.tensor(self.spec.action_low, dtype=torch.float32, device=self.device)
        self._high = torch.tensor(self.spec.action_high, dtype=torch.float32, device=self.device)
        self._act_dtype = self.vec.single_action_space.dtype or np.float32
        self._expert = resolve_expert(expert, self.spec.obs_dim, self.spec.action_dim, self.device)
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self.final_obs = torch.zeros(self.num_envs, self.spec.obs_dim, device=self.device)
        self.seed(seed)
        raw, _ = self.vec.reset(seed=int(seed))
        self._obs = self._to_obs(raw)

    # --- spec -----------------------------------------------------------------------------
    def _build_spec(self, env: Any, name: str | None, control_hz: float | None,
                    max_steps: int | None, low: list[float] | None,
                    high: list[float] | None, planner_only: list[int | str]) -> TaskSpec:
        gym = _gym()
        obs_space = self.vec.single_observation_space
        act_space = self.vec.single_action_space
        if not isinstance(act_space, gym.spaces.Box):
            raise GymAdapterError(f"action space {act_space} is not continuous (Box); edgerl's "
                                  "chunk planners and edit policies need continuous actions")
        if not isinstance(obs_space, gym.spaces.Box):
            raise GymAdapterError(f"observation space {obs_space} is not a Box; wrap the env in "
                                  "gymnasium.wrappers.FlattenObservation first")
        obs_dim = int(np.prod(obs_space.shape))
        act_dim = int(np.prod(act_space.shape))
        low = [float(x) for x in (low if low is not None else act_space.low.reshape(-1))]
        high = [float(x) for x in (high if high is not None else act_space.high.reshape(-1))]
        if len(low) != act_dim or len(high) != act_dim:
            raise GymAdapterError(f"action limits need {act_dim} elements, got {len(low)} and "
                                  f"{len(high)}")
        if not all(math.isfinite(x) for x in low + high) or any(h <= lo for lo, h in
                                                                 zip(low, high)):
            raise GymAdapterError(f"action limits must be finite with low < high, got low={low} "
                                  f"high={high}; pass action_low/action_high")
        hz = control_hz
        if not hz:
            dt = _first_attr(self.vec, "dt")
            hz = 1.0 / float(dt) if dt else float(self.vec.metadata.get("render_fps") or 0)
        if not hz or hz <= 0:
            raise GymAdapterError("cannot tell the env's control rate (no env.dt or "
                                  "render_fps); pass control_hz")
        if not max_steps:
            env_spec = _first_attr(self.vec, "spec")
            max_steps = getattr(env_spec, "max_episode_steps", None) or 1000
        env_id = env if isinstance(env, str) else getattr(_first_attr(self.vec, "spec"), "id",
                                                          type(env).__name__)
        obs_names = [f"obs{i}" for i in range(obs_dim)]
        return TaskSpec(name=name or f"{GYM_PREFIX}{env_id}",
                        obs_names=obs_names, obs_units=[""] * obs_dim,
                        action_names=[f"act{i}" for i in range(act_dim)],
                        action_units=[""] * act_dim, action_low=low, action_high=high,
                        control_hz=float(hz), max_episode_steps=int(max_steps),
                        planner_only=_planner_only_names(planner_only, obs_names))

    # --- VecEnv ---------------------------------------------------------------------------
    def _to_obs(self, raw: Any) -> torch.Tensor:
        arr = np.asarray(raw, dtype=np.float32).reshape(self.num_envs, -1)
        return torch.from_numpy(arr.copy()).to(self.device)

    def get_observations(self) -> TensorDict:
        return TensorDict({"policy": self._obs}, batch_size=[self.num_envs], device=self.device)

    def _step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        from gymnasium.vector import AutoresetMode

        clipped = torch.maximum(torch.minimum(actions.to(self.device), self._high), self._low)
        shape = (self.num_envs, *self.vec.single_action_space.shape)
        act = clipped.detach().cpu().numpy().astype(self._act_dtype).reshape(shape)
        raw, rew, term, trunc, infos = self.vec.step(act)
        term = np.asarray(term, dtype=bool)
        trunc = np.asarray(trunc, dtype=bool)
        done = term | trunc
        obs = self._to_obs(raw)
        done_t = torch.from_numpy(done).to(self.device)
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            final = infos.get("final_obs")
            if done.any() and final is not None:
                rows = np.stack([np.asarray(final[i], dtype=np.float32).reshape(-1)
                                 for i in np.flatnonzero(done)])
                self.final_obs[done_t] = torch.from_numpy(rows).to(self.device)
            success = self._flag(infos.get("final_info", {}), "is_success", done)
        else:
            self.final_obs[done_t] = obs[done_t]
            success = self._flag(infos, "is_success", done)
            if done.any():  # reset now: same-step semantics, no dropped action next step
                raw_reset, _ = self.vec.reset(options={"reset_mask": done.copy()})
                obs[done_t] = self._to_obs(raw_reset)[done_t]
        self._obs = obs
        self.episode_length_buf += 1
        self.episode_length_buf[done_t] = 0
        extras = {"time_outs": torch.from_numpy(trunc & ~term).to(self.device),
                  "success": torch.from_numpy(success & done).to(self.device),
                  "log": {}}
        rew_t = torch.as_tensor(np.asarray(rew, dtype=np.float32), device=self.device)
        return self.get_observations(), rew_t, done_t.long(), extras

    def _flag(self, infos: dict, key: str, done: np.ndarray) -> np.ndarray:
        """Boolean info flag ``key`` (N,) where the vector env reports it, else False."""
        value, mask = infos.get(key), infos.get(f"_{key}")
        if value is None:
            return np.zeros(self.num_envs, dtype=bool)
        out = np.asarray(value).astype(bool).reshape(-1)
        if mask is not None:
            out = out & np.asarray(mask, dtype=bool).reshape(-1)
        return out

    def reset(self, env_ids: torch.Tensor | None = None) -> TensorDict:
        """Reset ``env_ids`` (all when ``None``) and return the observations."""
        if env_ids is None:
            mask = np.ones(self.num_envs, dtype=bool)
        else:
            mask = np.zeros(self.num_envs, dtype=bool)
            mask[torch.as_tensor(env_ids).cpu().numpy()] = True
        if not mask.any():
            return self.get_observations()
        raw, _ = self.vec.reset(options={"reset_mask": mask})
        mask_t = torch.from_numpy(mask).to(self.device)
        self._obs[mask_t] = self._to_obs(raw)[mask_t]
        self.episode_length_buf[mask_t] = 0
        return self.get_observations()

    # --- edgerl additions -----------------------------------------------------------------
    def expert_action(self) -> torch.Tensor:
        """The expert's action for the current observations, (N, A), within the limits."""
        return clipped_expert_action(self._expert, self._obs, self.spec.name, EXPERT_RUN_HOW,
                                     self.device, self._low, self._high)

    def close(self) -> None:
        self.vec.close()


def _env_id(name: str) -> str:
    if not name.startswith(GYM_PREFIX) or len(name) == len(GYM_PREFIX):
        raise GymAdapterError(f"gymnasium task names look like 'gym:<EnvId>', got {name!r}")
    return name[len(GYM_PREFIX):]


def _planner_only_names(items: list[int | str], obs_names: list[str]) -> list[str]:
    """``planner_only`` as observation names: ints index ``obs_names``; names must exist."""
    out = []
    for item in items:
        if isinstance(item, int) and not isinstance(item, bool):
            if not 0 <= item < len(obs_names):
                raise GymAdapterError(f"planner_only index {item} is outside the observation "
                                      f"(0..{len(obs_names) - 1})")
            out.append(obs_names[item])
        elif isinstance(item, str) and item in obs_names:
            out.append(item)
        else:
            raise GymAdapterError(f"planner_only entry {item!r} is neither an observation index "
                                  f"nor one of obs0..obs{len(obs_names) - 1}")
    return out


def describe_gym_task(name: str) -> TaskInfo:
    """The registry's :class:`TaskInfo` for ``gym:<EnvId>`` (builds the env once to read it)."""
    return describe_built(name, lambda: GymVecEnv(_env_id(name), num_envs=1), GymAdapterError,
                          "gymnasium", f"gymnasium env {_env_id(name)} (edgerl.sim.adapters)",
                          "edgerl.sim.adapters.gymnasium:make_gym_task")


def make_gym_task(name: str, num_envs: int = 1, device: str = "cpu", seed: int = 0,
                  expert_run: str | None = None, **kwargs: Any) -> GymVecEnv:
    """Registry factory of ``gym:<EnvId>``: ``expert_run`` is a ``nodelay`` run directory.

    Other keyword arguments go to :class:`GymVecEnv` (``vectorization``, ``control_hz``...).
    """
    return GymVecEnv(_env_id(name), num_envs=num_envs, device=device, seed=seed,
                     expert=expert_run, name=name, **kwargs)
