"""A trained policy as a task's expert: what a foreign env uses instead of a scripted one.

edgerl's own tasks have scripted (privileged) experts; a gymnasium / Isaac Lab / mjlab task
does not. The pipeline there is: train a ``nodelay`` PPO policy (the expert), then build the
task with ``expert_run=<that run>`` so ``expert_action()`` (BC demos, the ``expert`` planner)
evaluates it. The run is loaded on first use only, so building the env (export, eval) never
pays for it.

``edgerl.sim`` sits below ``edgerl.policies`` and does not import it: the policies package
registers the code that reads a run (``edgerl.policies.runs.load_policy``) with
:func:`edgerl.sim.adapters.run_loader.set_run_loader` when it is imported, and
:meth:`RunExpert.load` calls whatever is registered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from edgerl.sim.adapters.run_loader import run_loader, set_run_loader

__all__ = ["EXPERT_RUN_HOW", "ExpertError", "RunExpert", "clipped_expert_action",
           "resolve_expert", "set_run_loader"]

#: How to give a family task an expert (the adapters' message when it has none).
EXPERT_RUN_HOW = ("build the task with expert_run=<that run> (edgerl train ... --task-arg "
                  "expert_run=RUN)")

log = logging.getLogger(__name__)


class ExpertError(RuntimeError):
    """The task has no expert, or the expert run does not fit the task."""


class RunExpert:
    """Deterministic actor of a ``nodelay`` training run: ``(N, O) obs -> (N, A)`` actions.

    Args:
        run_dir: A run directory written by ``edgerl train TASK --method nodelay``.
        obs_dim / action_dim: The task's sizes; checked against the run on load.
        device: Torch device the actor runs on.
    """

    def __init__(self, run_dir: str | Path, obs_dim: int, action_dim: int,
                 device: torch.device | str = "cpu") -> None:
        self.run_dir = Path(run_dir)
        self.obs_dim, self.action_dim = int(obs_dim), int(action_dim)
        self.device = torch.device(device)
        self._actor: Any = None
        if not (self.run_dir / "config.json").is_file():
            raise ExpertError(f"expert_run {self.run_dir}: not a training run (no config.json)")

    def load(self) -> Any:
        """Load (once) and return the actor module; checks method and sizes."""
        if self._actor is None:
            loader = run_loader()
            if loader is None:
                raise ExpertError(f"expert_run {self.run_dir}: no run loader registered "
                                  "(import edgerl.policies first)")
            loaded = loader(self.run_dir, str(self.device))
            if loaded.config.method != "nodelay" or loaded.actor is None:
                raise ExpertError(f"expert_run {self.run_dir}: method "
                                  f"{loaded.config.method!r}; the expert must be a 'nodelay' "
                                  "run (its policy sees the plain observation)")
            if (loaded.actor.input_dim, loaded.actor.output_dim) != (self.obs_dim,
                                                                     self.action_dim):
                raise ExpertError(
                    f"expert_run {self.run_dir}: actor maps {loaded.actor.input_dim} -> "
                    f"{loaded.actor.output_dim}, the task has obs {self.obs_dim} / action "
                    f"{self.action_dim}")
            self._actor = loaded.actor
            log.info("expert: loaded %s (%s)", self.run_dir, loaded.checkpoint)
        return self._actor

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """Actions ``(N, A)`` float32 for observations ``obs (N, O)`` (no grad)."""
        actor = self.load()
        with torch.no_grad():
            return actor(obs.to(self.device, torch.float32)).to(obs.device)


def clipped_expert_action(expert: Callable[[torch.Tensor], torch.Tensor] | None,
                          obs: torch.Tensor, task: str, how_to_build: str,
                          device: torch.device, low: torch.Tensor, high: torch.Tensor
                          ) -> torch.Tensor:
    """An adapter's ``expert_action()``: ``expert(obs)`` as float32 (N, A) on ``device``,
    clamped to ``[low, high]``; ``NotImplementedError`` naming ``task`` (and ``how_to_build``
    it with an expert run) when the task has no expert."""
    if expert is None:
        raise NotImplementedError(
            f"{task} has no scripted expert: train a 'nodelay' PPO expert first "
            f"(edgerl train {task} --method nodelay) and {how_to_build}")
    act = expert(obs).to(device, torch.float32)
    return torch.maximum(torch.minimum(act, high), low)


def resolve_expert(expert: Callable[[torch.Tensor], torch.Tensor] | str | Path | None,
                   obs_dim: int, action_dim: int, device: torch.device
                   ) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """An adapter's ``expert`` argument as a callable: a ``nodelay`` run directory becomes a
    :class:`RunExpert` (loaded on first use); a callable or ``None`` is kept."""
    if isinstance(expert, (str, Path)):
        return RunExpert(expert, obs_dim, action_dim, device)
    return expert
