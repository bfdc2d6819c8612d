"""edgerl.sim: vectorized latency-aware tasks (MuJoCo, torch) and latency wrappers.

Importing the package is cheap; backends (torch, MuJoCo) load when a task is made.
"""

from __future__ import annotations

from edgerl.sim.registry import TaskInfo, list_tasks, make_task, register_task

__all__ = ["TaskInfo", "list_tasks", "make_task", "register_task"]
