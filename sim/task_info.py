"""``TaskInfo``: what the task registry knows about a task (no imports beyond the standard
library, so task declarations and adapters can name it without importing the registry)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["TaskInfo", "describe_built"]


@dataclass(frozen=True)
class TaskInfo:
    """What ``edgerl tasks`` shows about a task.

    Attributes:
        name: Registry key, e.g. ``"ball_balance"``.
        backend: ``"mujoco"``, ``"torch"``, ``"gymnasium"``, ...
        obs_dim: Size of the policy observation.
        action_dim: Size of the action.
        control_hz: Control rate the policy runs at.
        description: One line.
        entry_point: ``"package.module:factory"``; ``factory(num_envs=..., **kw)`` -> VecEnv.
        language: ``"package.module"`` with the task's instruction paraphrases
            (``INSTRUCTIONS``, ``COLORS``, ``paraphrase_split``) for the language planner;
            "" for a task without them.
    """

    name: str
    backend: str
    obs_dim: int
    action_dim: int
    control_hz: float
    description: str
    entry_point: str
    language: str = ""

    def summary(self) -> dict[str, Any]:
        """The JSON object ``edgerl tasks --json`` prints."""
        return {"name": self.name, "backend": self.backend, "obs_dim": self.obs_dim,
                "action_dim": self.action_dim, "control_hz": self.control_hz,
                "description": self.description}


def describe_built(name: str, build: Callable[[], Any], errors: type[Exception] | tuple,
                   backend: str, description: str, entry_point: str) -> TaskInfo:
    """A task family member's :class:`TaskInfo`, read off a one-env instance ``build()``
    (closed after); the family's ``errors`` become a ``KeyError`` naming the task."""
    try:
        env = build()
    except errors as exc:
        raise KeyError(f"task {name!r}: {exc}") from exc
    try:
        spec = env.spec
        return TaskInfo(name=name, backend=backend, obs_dim=spec.obs_dim,
                        action_dim=spec.action_dim, control_hz=spec.control_hz,
                        description=description, entry_point=entry_point)
    finally:
        env.close()
