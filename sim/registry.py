"""One registry of tasks: name -> :class:`TaskInfo` with a lazy entry point.

Registering a task costs nothing at import time: the entry point (``"module:factory"``) is
imported only by :func:`make_task`, so ``edgerl tasks`` lists tasks without loading MuJoCo.
edgerl's own tasks are declared (data only) in :mod:`edgerl.sim.tasks` and registered on first
use; a user registers their own with :func:`register_task`.
"""

from __future__ import annotations

import importlib
from typing import Any

from edgerl.sim.task_info import TaskInfo

__all__ = ["TaskInfo", "get_task_info", "list_task_families", "list_tasks", "make_task",
           "register_task", "register_task_family"]


_REGISTRY: dict[str, TaskInfo] = {}
_BUILTINS_LOADED = False
#: Task families (``"gym:"`` -> ``"module:describe"``): names with the prefix are resolved on
#: first use by ``describe(name) -> TaskInfo``; their factory is called as ``factory(name, **kw)``.
_FAMILIES: dict[str, str] = {}
_FAMILY_MEMBERS: set[str] = set()


def register_task(info: TaskInfo) -> TaskInfo:
    """Add a task; re-registering the same name with different info is an error."""
    existing = _REGISTRY.get(info.name)
    if existing is not None and existing != info:
        raise ValueError(f"task {info.name!r} is already registered with different settings")
    _REGISTRY[info.name] = info
    return info


def register_task_family(prefix: str, describe: str) -> None:
    """Resolve every task name starting with ``prefix`` lazily through ``describe``.

    ``describe`` is ``"module:function"``; ``function(name) -> TaskInfo`` is imported and called
    the first time such a name is looked up (e.g. ``"gym:Pendulum-v1"``), and the factory of the
    returned entry point receives the full name as its first argument.
    """
    existing = _FAMILIES.get(prefix)
    if existing is not None and existing != describe:
        raise ValueError(f"task family {prefix!r} is already registered with {existing!r}")
    _FAMILIES[prefix] = describe


def list_task_families() -> dict[str, str]:
    """``prefix -> describe entry point`` of the registered task families."""
    _load_builtins()
    return dict(_FAMILIES)


def _import_attr(entry_point: str) -> Any:
    module_name, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def _load_builtins() -> None:
    """Register edgerl's own tasks and task families, declared in :mod:`edgerl.sim.tasks`
    (cheap: no backend imports)."""
    global _BUILTINS_LOADED
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED = True
        from edgerl.sim.tasks import BUILTIN_TASKS, TASK_FAMILIES

        for info in BUILTIN_TASKS:
            register_task(info)
        for prefix, describe in TASK_FAMILIES.items():
            register_task_family(prefix, describe)


def list_tasks() -> list[TaskInfo]:
    """All registered tasks, sorted by name (family members like ``gym:X`` are not listed)."""
    _load_builtins()
    return [_REGISTRY[k] for k in sorted(_REGISTRY) if k not in _FAMILY_MEMBERS]


def get_task_info(name: str) -> TaskInfo:
    """The :class:`TaskInfo` for ``name``; unknown names list the known ones."""
    _load_builtins()
    if name not in _REGISTRY:
        for prefix, describe in _FAMILIES.items():
            if name.startswith(prefix):
                info = register_task(_import_attr(describe)(name))
                _FAMILY_MEMBERS.add(name)
                return info
    if name not in _REGISTRY:
        names = [k for k in sorted(_REGISTRY) if k not in _FAMILY_MEMBERS]
        known = ", ".join([*names, *(f"{p}<name>" for p in _FAMILIES)]) or "(none)"
        raise KeyError(f"unknown task {name!r}; known tasks: {known}")
    return _REGISTRY[name]


def make_task(name: str, **kwargs: Any) -> Any:
    """Build the task's vectorized environment: ``factory(**kwargs)``."""
    info = get_task_info(name)
    factory = _import_attr(info.entry_point)
    if name in _FAMILY_MEMBERS:
        return factory(name, **kwargs)
    return factory(**kwargs)
