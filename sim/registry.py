"""One registry of tasks: name -> :class:`TaskInfo` with a lazy entry point.

Registering a task costs nothing at import time: the entry point (``"module:factory"``) is
imported only by :func:`make_task`, so ``edgerl tasks`` lists tasks without loading MuJoCo.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

__all__ = ["TaskInfo", "get_task_info", "list_tasks", "make_task", "register_task"]


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
    """

    name: str
    backend: str
    obs_dim: int
    action_dim: int
    control_hz: float
    description: str
    entry_point: str

    def summary(self) -> dict[str, Any]:
        """The JSON object ``edgerl tasks --json`` prints."""
        return {"name": self.name, "backend": self.backend, "obs_dim": self.obs_dim,
                "action_dim": self.action_dim, "control_hz": self.control_hz,
                "description": self.description}


_REGISTRY: dict[str, TaskInfo] = {}
_BUILTINS_LOADED = False


def register_task(info: TaskInfo) -> TaskInfo:
    """Add a task; re-registering the same name with different info is an error."""
    existing = _REGISTRY.get(info.name)
    if existing is not None and existing != info:
        raise ValueError(f"task {info.name!r} is already registered with different settings")
    _REGISTRY[info.name] = info
    return info


def _load_builtins() -> None:
    """Import the modules that register edgerl's own tasks (cheap: no backend imports)."""
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        importlib.import_module("edgerl.sim.tasks")


def list_tasks() -> list[TaskInfo]:
    """All registered tasks, sorted by name."""
    _load_builtins()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def get_task_info(name: str) -> TaskInfo:
    """The :class:`TaskInfo` for ``name``; unknown names list the known ones."""
    _load_builtins()
    if name not in _REGISTRY:
        known = ", ".join(sorted(_REGISTRY)) or "(none)"
        raise KeyError(f"unknown task {name!r}; known tasks: {known}")
    return _REGISTRY[name]


def make_task(name: str, **kwargs: Any) -> Any:
    """Build the task's vectorized environment: ``factory(**kwargs)``."""
    info = get_task_info(name)
    module_name, _, attr = info.entry_point.partition(":")
    factory = getattr(importlib.import_module(module_name), attr)
    return factory(**kwargs)
