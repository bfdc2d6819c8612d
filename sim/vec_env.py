"""The vectorized environment interface edgerl's tasks and wrappers share.

It is rsl-rl-lib's ``VecEnv`` (5.5.1) by duck typing -- the same attributes and methods, so
``OnPolicyRunner`` trains it directly and Isaac Lab / mjlab ``RslRlVecEnvWrapper`` envs fit the
same wrappers -- plus what latency-aware training needs: a :class:`TaskSpec` (names, units,
limits, rate), a scripted expert, and a success flag.

Conventions: every tensor is ``(num_envs, ...)`` on ``device``; observations are a
``TensorDict`` with group ``"policy"`` (the robot observation the runtime will also see) and
optionally ``"critic"`` (privileged); ``step`` returns ``(obs, rew, dones, extras)`` with
``extras["time_outs"]`` (truncations) and ``extras["success"]`` (episodes that ended this step
successfully) and ``extras["log"]``.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

import torch
from tensordict import TensorDict

__all__ = ["ActionError", "EdgeVecEnv", "TaskSpec"]


class ActionError(ValueError):
    """An action batch has the wrong shape or non-finite values."""


@dataclass
class TaskSpec:
    """Static description of a task; the exporter copies it into the bundle's manifest.

    Attributes:
        name: Registry name.
        obs_names / obs_units: one per robot-observation element (size O).
        action_names / action_units / action_low / action_high: one per action element (A).
        control_hz: Policy rate (Hz); one ``step`` is ``1 / control_hz`` seconds.
        max_episode_steps: Episode length limit in control steps.
        instructions: For language-conditioned tasks, the instruction templates (else empty).
        planner_only: Observation names only the slow planner sees (the goal an instruction
            names, what a camera shows, privileged state); the fast edit policy reads the
            others (:attr:`fast_obs_indices`). Empty = no split: the fast policy sees it all.
    """

    name: str
    obs_names: list[str]
    obs_units: list[str]
    action_names: list[str]
    action_units: list[str]
    action_low: list[float]
    action_high: list[float]
    control_hz: float
    max_episode_steps: int
    instructions: list[str] = field(default_factory=list)
    planner_only: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        unknown = [n for n in self.planner_only if n not in self.obs_names]
        if unknown:
            raise ValueError(f"{self.name}: planner_only names {unknown} are not observation "
                             f"names ({', '.join(self.obs_names)})")
        if len(self.planner_only) >= len(self.obs_names):
            raise ValueError(f"{self.name}: planner_only leaves the fast policy no observation")

    @property
    def fast_obs_indices(self) -> list[int]:
        """Indices of the observation elements the fast policy reads (all when no split)."""
        hidden = set(self.planner_only)
        return [i for i, n in enumerate(self.obs_names) if n not in hidden]

    @property
    def obs_dim(self) -> int:
        return len(self.obs_names)

    @property
    def action_dim(self) -> int:
        return len(self.action_names)

    @property
    def control_dt(self) -> float:
        return 1.0 / self.control_hz


class EdgeVecEnv(abc.ABC):
    """Base class of edgerl's vectorized tasks (rsl_rl ``VecEnv`` compatible)."""

    num_envs: int
    """Number of environments."""
    num_actions: int
    """Action size A."""
    max_episode_length: int | torch.Tensor
    """Episode length limit in steps."""
    episode_length_buf: torch.Tensor
    """Shape: (num_envs,) steps since reset."""
    device: torch.device | str
    """Where every tensor lives."""
    cfg: Any
    """The task's config dataclass."""
    spec: TaskSpec
    """Names, units, limits, rate."""

    # --- the rsl_rl VecEnv methods ------------------------------------------------------------
    @abc.abstractmethod
    def get_observations(self) -> TensorDict:
        """Current observations: TensorDict with ``"policy"`` of shape (num_envs, O)."""

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Validate ``actions`` (num_envs, A) and advance every env one control step."""
        self.check_actions(actions)
        return self._step(actions)

    @abc.abstractmethod
    def _step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Advance one control step with already-validated actions."""

    @abc.abstractmethod
    def reset(self, env_ids: torch.Tensor | None = None) -> TensorDict:
        """Reset the given envs (all when ``None``); returns the observations."""

    # --- edgerl additions ---------------------------------------------------------------------
    @abc.abstractmethod
    def expert_action(self) -> torch.Tensor:
        """Scripted (privileged) expert action for the current state, (num_envs, A)."""

    def expert_chunk(self, horizon: int, env_ids: torch.Tensor | None = None) -> torch.Tensor:
        """The expert's next ``horizon`` actions from the current state, (n, horizon, A).

        Used by ``edgerl.sim.wrappers.ExpertPlanner``. Tasks that can roll their dynamics
        forward without side effects override this with a real rollout; the default holds the
        current expert action for every row. Must not change the env's state or random stream.
        """
        action = self.expert_action()
        if env_ids is not None:
            action = action[env_ids]
        return action[:, None, :].expand(-1, int(horizon), -1).clone()

    def raw_physics_steps_per_s(self, num_envs: int, steps: int) -> float:
        """Env-steps/s of the physics backend alone (zero control, no obs/reward/wrappers).

        ``edgerl bench sim`` reports it next to the full ``step`` rate. Each backend measures
        its own kernel (torch dynamics, ``mujoco.rollout``...) on ``num_envs`` envs for
        ``steps`` control steps, without disturbing this env's state.
        """
        raise NotImplementedError(f"{type(self).__name__} does not measure raw physics")

    def seed(self, seed: int) -> None:
        """Re-seed the env's random generator (trajectories are then reproducible)."""
        self.generator = torch.Generator(device="cpu").manual_seed(int(seed))

    def check_actions(self, actions: torch.Tensor) -> None:
        """Raise :class:`ActionError` on wrong shape or NaN/inf (state is never touched)."""
        expected = (self.num_envs, self.num_actions)
        if not isinstance(actions, torch.Tensor):
            raise ActionError(f"actions must be a torch.Tensor, got {type(actions).__name__}")
        if tuple(actions.shape) != expected:
            raise ActionError(f"actions must have shape {expected}, got {tuple(actions.shape)}")
        if not torch.isfinite(actions).all():
            bad = (~torch.isfinite(actions)).nonzero()[0].tolist()
            raise ActionError(f"actions[{bad[0]}, {bad[1]}] is not finite "
                              f"({actions[bad[0], bad[1]].item()})")

    def close(self) -> None:
        """Release backend resources (threads, GPU memory); the default holds none."""
        return None
