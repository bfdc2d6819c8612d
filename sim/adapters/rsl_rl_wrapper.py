"""Isaac Lab and mjlab tasks (their ``RslRlVecEnvWrapper``) as edgerl VecEnvs with a layout.

Both frameworks already hand rsl_rl a ``VecEnv``; what edgerl adds is the task's
observation/action *layout* -- names per element, limits, control rate -- recorded in a
:class:`TaskSpec` so the exported ``manifest.json`` tells the runtime what each input and
output means. Names come from the env's managers where available:

* observations: ``observation_manager.active_terms[group]`` with
  ``group_obs_term_dim[group]``: a 1-element term keeps its name (``cart_pos``), an n-element
  one is ``pole_angle[0]``, ``pole_angle[1]``...
* actions: ``action_manager.active_terms`` with ``action_term_dim``; element names are
  ``{term}/{target}`` from the term's ``target_names`` (mjlab) or ``_joint_names`` (Isaac
  Lab joint actions), else ``{term}[i]``.

Anything else (a direct-workflow env, a custom VecEnv) gets generic ``obs{i}`` / ``act{i}``.
The robot observation group is ``policy`` (Isaac Lab) or ``actor`` (mjlab >= 1.5); it is
exposed as ``"policy"`` for edgerl's wrappers and trainer; other groups pass through.

Task families: ``mjlab:<TaskId>`` (e.g. ``mjlab:Mjlab-Cartpole-Balance``) and
``isaaclab:<TaskId>`` (e.g. ``isaaclab:Isaac-Cartpole-v0``). Both import their framework only
when a task is built, and fail with :class:`FrameworkUnavailable` naming what to install.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDict

from edgerl.sim.adapters.expert import clipped_expert_action, resolve_expert
from edgerl.sim.task_info import TaskInfo
from edgerl.sim.vec_env import EdgeVecEnv, TaskSpec
from edgerl.sim.wrappers.base import forwarded_property

__all__ = ["ISAACLAB_PREFIX", "MJLAB_PREFIX", "FrameworkUnavailable", "RslRlEnvAdapter",
           "TaskLayout", "describe_isaaclab_task", "describe_mjlab_task", "extract_layout",
           "make_isaaclab_task", "make_mjlab_task"]

log = logging.getLogger(__name__)

MJLAB_PREFIX = "mjlab:"
ISAACLAB_PREFIX = "isaaclab:"
#: Observation groups tried (in order) as the robot observation.
POLICY_GROUPS = ("policy", "actor")


class FrameworkUnavailable(ImportError):
    """Isaac Lab / mjlab cannot be imported in this Python environment."""


class TaskLayout:
    """Names of the robot observation's and the action's elements.

    Attributes:
        obs_names: (O,) element names. action_names: (A,) element names.
        source: ``"managers"`` when read from the env's managers, else ``"generic"``.
    """

    def __init__(self, obs_names: list[str], action_names: list[str], source: str) -> None:
        self.obs_names, self.action_names, self.source = obs_names, action_names, source

    def __repr__(self) -> str:
        return (f"TaskLayout(obs={self.obs_names}, actions={self.action_names}, "
                f"source={self.source!r})")


def _element_names(term: str, shape: Any) -> list[str]:
    n = int(math.prod(tuple(shape))) if not isinstance(shape, int) else int(shape)
    return [term] if n == 1 else [f"{term}[{i}]" for i in range(n)]


def _obs_names(unwrapped: Any, group: str, obs_dim: int) -> list[str] | None:
    manager = getattr(unwrapped, "observation_manager", None)
    if manager is None:
        return None
    try:
        terms = list(manager.active_terms[group])
        dims = list(manager.group_obs_term_dim[group])
    except (KeyError, AttributeError, TypeError):
        return None
    names = [n for term, shape in zip(terms, dims) for n in _element_names(term, shape)]
    return names if len(names) == obs_dim and len(set(names)) == obs_dim else None


def _action_names(unwrapped: Any, action_dim: int) -> list[str] | None:
    manager = getattr(unwrapped, "action_manager", None)
    if manager is None:
        return None
    try:
        terms = list(manager.active_terms)
        dims = [int(d) for d in manager.action_term_dim]
    except (AttributeError, TypeError):
        return None
    names: list[str] = []
    for term, dim in zip(terms, dims):
        try:
            obj = manager.get_term(term)
        except (KeyError, AttributeError):
            obj = None
        targets = getattr(obj, "target_names", None) or getattr(obj, "_joint_names", None)
        if targets is not None and len(targets) == dim:
            names += [f"{term}/{t}" for t in targets]
        else:
            names += _element_names(term, dim)
    return names if len(names) == action_dim and len(set(names)) == action_dim else None


def extract_layout(env: Any, group: str, obs_dim: int, action_dim: int) -> TaskLayout:
    """The :class:`TaskLayout` of an rsl_rl VecEnv (names from managers when it has them)."""
    unwrapped = getattr(env, "unwrapped", env)
    obs = _obs_names(unwrapped, group, obs_dim)
    act = _action_names(unwrapped, action_dim)
    source = "managers" if obs is not None and act is not None else "generic"
    return TaskLayout(obs or [f"obs{i}" for i in range(obs_dim)],
                      act or [f"act{i}" for i in range(action_dim)], source)


def _pick_group(obs: Any, group: str | None) -> str:
    keys = list(obs.keys())
    if group is not None:
        if group not in keys:
            raise ValueError(f"observation group {group!r} not in the env's groups {keys}")
        return group
    for name in POLICY_GROUPS:
        if name in keys:
            return name
    raise ValueError(f"no robot observation group ({' or '.join(POLICY_GROUPS)}) among {keys}; "
                     "pass policy_group=")


class RslRlEnvAdapter(EdgeVecEnv):
    """An rsl_rl ``VecEnv`` (Isaac Lab / mjlab ``RslRlVecEnvWrapper``) with a :class:`TaskSpec`.

    Args:
        env: The rsl_rl VecEnv (auto-resetting in ``step``, as both frameworks do).
        name: Task name for the spec / manifest.
        policy_group: Observation group of the robot observation (default ``policy`` or
            ``actor``).
        action_low / action_high: Action limits (A,). Default: ``+-clip_actions`` of the
            wrapper when set, else ``+-1`` (policy-output units; a warning says so).
        control_hz: Default ``1 / env.unwrapped.step_dt``.
        expert: ``(N, O) -> (N, A)`` callable or a ``nodelay`` run directory.
    """

    def __init__(self, env: Any, name: str = "rsl_rl_env", *, policy_group: str | None = None,
                 action_low: list[float] | None = None, action_high: list[float] | None = None,
                 control_hz: float | None = None,
                 expert: Callable[[torch.Tensor], torch.Tensor] | str | Path | None = None
                 ) -> None:
        self.env = env
        self.num_envs = int(env.num_envs)
        self.num_actions = int(env.num_actions)
        self.device = torch.device(env.device)
        first = env.get_observations()
        self.policy_group = _pick_group(first, policy_group)
        obs_dim = int(first[self.policy_group].shape[-1])
        layout = extract_layout(env, self.policy_group, obs_dim, self.num_actions)
        self.layout = layout
        low, high = self._limits(action_low, action_high)
        unwrapped = getattr(env, "unwrapped", env)
        hz = control_hz or (1.0 / float(unwrapped.step_dt) if getattr(unwrapped, "step_dt", None)
                            else None)
        if not hz:
            raise ValueError(f"{name}: cannot tell the control rate (no unwrapped.step_dt); "
                             "pass control_hz")
        max_len = env.max_episode_length
        max_len = int(max_len.max()) if isinstance(max_len, torch.Tensor) else int(max_len)
        self.spec = TaskSpec(name=name, obs_names=layout.obs_names, obs_units=[""] * obs_dim,
                             action_names=layout.action_names,
                             action_units=[""] * self.num_actions, action_low=low,
                             action_high=high, control_hz=float(hz), max_episode_steps=max_len)
        self.max_episode_length = max_len
        self._low = torch.tensor(low, dtype=torch.float32, device=self.device)
        self._high = torch.tensor(high, dtype=torch.float32, device=self.device)
        self._expert = resolve_expert(expert, obs_dim, self.num_actions, self.device)
        self._obs = self._remap(first)
        log.info("%s: layout from %s: obs %s, actions %s, %.1f Hz", name, layout.source,
                 layout.obs_names, layout.action_names, hz)

    def _limits(self, low: list[float] | None, high: list[float] | None
                ) -> tuple[list[float], list[float]]:
        a = self.num_actions
        if low is None or high is None:
            clip = getattr(self.env, "clip_actions", None)
            bound = float(clip) if clip else 1.0
            if not clip:
                log.warning("action limits unknown: using +-1 (pass action_low/action_high)")
            low = [-bound] * a if low is None else low
            high = [bound] * a if high is None else high
        low, high = [float(x) for x in low], [float(x) for x in high]
        if len(low) != a or len(high) != a or any(h <= lo for lo, h in zip(low, high)):
            raise ValueError(f"action limits need {a} elements with low < high, got low={low} "
                             f"high={high}")
        return low, high

    @property
    def cfg(self) -> Any:
        return getattr(self.env, "cfg", None)

    @property
    def unwrapped(self) -> Any:
        return getattr(self.env, "unwrapped", self.env)

    episode_length_buf = forwarded_property("episode_length_buf")

    def _remap(self, obs: Any) -> TensorDict:
        groups = {k: v for k, v in obs.items() if k != self.policy_group}
        groups["policy"] = obs[self.policy_group]
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> TensorDict:
        return self._obs

    def _step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        clipped = torch.maximum(torch.minimum(actions.to(self.device), self._high), self._low)
        obs, rew, dones, extras = self.env.step(clipped)
        extras = dict(extras)
        zeros = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        extras.setdefault("time_outs", zeros)
        extras.setdefault("success", zeros)
        self._obs = self._remap(obs)
        return self._obs, rew, dones, extras

    def reset(self, env_ids: torch.Tensor | None = None) -> TensorDict:
        """Reset ``env_ids`` through the framework env (``reset(env_ids=...)``)."""
        unwrapped = self.unwrapped
        if env_ids is None:
            out = self.env.reset()
        else:
            out = unwrapped.reset(env_ids=torch.as_tensor(env_ids, device=self.device))
        obs = out[0] if isinstance(out, tuple) else out
        if not isinstance(obs, TensorDict):
            obs = TensorDict(dict(obs), batch_size=[self.num_envs])
        self._obs = self._remap(obs)
        return self._obs

    def expert_action(self) -> torch.Tensor:
        return clipped_expert_action(self._expert, self._obs["policy"], self.spec.name,
                                     "pass --task-arg expert_run=RUN", self.device, self._low,
                                     self._high)

    def close(self) -> None:
        self.env.close()


# --- mjlab ------------------------------------------------------------------------------------
def _task_id(name: str, prefix: str) -> str:
    if not name.startswith(prefix) or len(name) == len(prefix):
        raise ValueError(f"task names look like '{prefix}<TaskId>', got {name!r}")
    return name[len(prefix):]


def _import_mjlab() -> Any:
    try:
        import mjlab.tasks  # noqa: F401  (registers mjlab's tasks)
        from mjlab.envs import ManagerBasedRlEnv
        from mjlab.rl import RslRlVecEnvWrapper
        from mjlab.tasks import registry
    except ImportError as exc:
        raise FrameworkUnavailable(
            f"mjlab is not importable here ({exc}). mjlab pins mujoco~=3.11 and its own "
            "rsl-rl-lib, so it lives in a separate venv: `make test-mjlab` creates .venv-mjlab "
            "(see docs/byoe.md)") from exc
    return registry, ManagerBasedRlEnv, RslRlVecEnvWrapper


def describe_mjlab_task(name: str) -> TaskInfo:
    """Registry entry of ``mjlab:<TaskId>`` (sizes are known once built: 0 here)."""
    try:
        registry, _, _ = _import_mjlab()
    except FrameworkUnavailable as exc:
        raise KeyError(f"task {name!r}: {exc}") from exc
    task_id = _task_id(name, MJLAB_PREFIX)
    if task_id not in registry.list_tasks():
        raise KeyError(f"unknown mjlab task {task_id!r}; mjlab has: "
                       f"{', '.join(registry.list_tasks())}")
    cfg = registry.load_env_cfg(task_id)
    hz = 1.0 / (float(cfg.sim.mujoco.timestep) * int(cfg.decimation))
    return TaskInfo(name=name, backend="mjlab", obs_dim=0, action_dim=0, control_hz=hz,
                    description=f"mjlab task {task_id} (RslRlVecEnvWrapper)",
                    entry_point="edgerl.sim.adapters.rsl_rl_wrapper:make_mjlab_task")


def make_mjlab_task(name: str, num_envs: int = 1, device: str = "cpu", seed: int = 0,
                    expert_run: str | None = None, clip_actions: float | None = None,
                    **kwargs: Any) -> RslRlEnvAdapter:
    """Build ``mjlab:<TaskId>``: ``ManagerBasedRlEnv`` -> ``RslRlVecEnvWrapper`` -> adapter."""
    from edgerl.sim.adapters.gymnasium import resolve_device

    registry, env_cls, wrapper_cls = _import_mjlab()
    dev = resolve_device(device)
    cfg = registry.load_env_cfg(_task_id(name, MJLAB_PREFIX))
    cfg.scene.num_envs = int(num_envs)
    cfg.seed = int(seed)
    env = wrapper_cls(env_cls(cfg, device=str(dev)), clip_actions=clip_actions)
    return RslRlEnvAdapter(env, name=name, expert=expert_run, **kwargs)


# --- Isaac Lab -------------------------------------------------------------------------------
_ISAAC_APP: Any = None


def _launch_isaac_app() -> None:
    """Start Isaac Sim headless once (``isaaclab.app.AppLauncher``), as Isaac Lab's scripts do
    before importing any task; skipped when ``isaaclab.app`` is absent (kit-less installs) or
    ``EDGERL_ISAACLAB_LAUNCH_APP=0`` (your process started the app itself)."""
    import os

    global _ISAAC_APP
    if _ISAAC_APP is not None or os.environ.get("EDGERL_ISAACLAB_LAUNCH_APP", "1") == "0":
        return
    try:
        from isaaclab.app import AppLauncher
    except ImportError:
        return
    _ISAAC_APP = AppLauncher(headless=True).app
    log.info("started Isaac Sim headless (AppLauncher)")


def _import_isaaclab(launch_app: bool = False) -> Any:
    try:
        if launch_app:
            _launch_isaac_app()
        import gymnasium as gym
        import isaaclab_tasks  # noqa: F401  (registers Isaac-* gym ids)
        from isaaclab_rl.rsl_rl import RslRlVecEnvWrapper
        from isaaclab_tasks.utils import parse_env_cfg
    except ImportError as exc:
        raise FrameworkUnavailable(
            f"Isaac Lab is not importable here ({exc}). Install Isaac Lab (>= 2.x; 3.0 for the "
            "kit-less Newton / MuJoCo-Warp backends, Python 3.12) with isaaclab_tasks and "
            "isaaclab_rl, and start Isaac Sim's AppLauncher first when your backend needs "
            "it (see docs/byoe.md)") from exc
    return gym, parse_env_cfg, RslRlVecEnvWrapper


def describe_isaaclab_task(name: str) -> TaskInfo:
    """Registry entry of ``isaaclab:<TaskId>`` (sizes are known once built: 0 here)."""
    try:
        gym, _, _ = _import_isaaclab(launch_app=True)
    except FrameworkUnavailable as exc:
        raise KeyError(f"task {name!r}: {exc}") from exc
    task_id = _task_id(name, ISAACLAB_PREFIX)
    if task_id not in gym.registry:
        raise KeyError(f"unknown Isaac Lab task {task_id!r}")
    return TaskInfo(name=name, backend="isaaclab", obs_dim=0, action_dim=0, control_hz=0.0,
                    description=f"Isaac Lab task {task_id} (RslRlVecEnvWrapper)",
                    entry_point="edgerl.sim.adapters.rsl_rl_wrapper:make_isaaclab_task")


def make_isaaclab_task(name: str, num_envs: int = 1, device: str = "cpu", seed: int = 0,
                       expert_run: str | None = None, clip_actions: float | None = None,
                       launch_app: bool = True, **kwargs: Any) -> RslRlEnvAdapter:
    """Build ``isaaclab:<TaskId>``: ``gym.make(id, cfg=parse_env_cfg(...))`` -> wrapper.

    ``launch_app`` starts Isaac Sim headless first (``AppLauncher``) when ``isaaclab.app``
    exists (see :func:`_launch_isaac_app`; ``EDGERL_ISAACLAB_LAUNCH_APP=0`` turns it off).
    """
    from edgerl.sim.adapters.gymnasium import resolve_device

    gym, parse_env_cfg, wrapper_cls = _import_isaaclab(launch_app)
    task_id = _task_id(name, ISAACLAB_PREFIX)
    dev = resolve_device(device)
    env_cfg = parse_env_cfg(task_id, device=str(dev), num_envs=int(num_envs))
    env_cfg.seed = int(seed)
    env = wrapper_cls(gym.make(task_id, cfg=env_cfg), clip_actions=clip_actions)
    return RslRlEnvAdapter(env, name=name, expert=expert_run, **kwargs)
