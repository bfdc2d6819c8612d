"""Batched planners for the latency wrappers: ``plan(obs (n, O), env_ids (n,)) -> (n, H, A)``."""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["ExpertPlanner"]


class ExpertPlanner:
    """The task's scripted expert rolled out ``horizon`` steps (privileged: uses the state).

    Calls ``task.expert_chunk(horizon, env_ids)`` on the innermost env (see
    ``EdgeVecEnv.expert_chunk``); the observation argument is ignored.

    Args:
        env: The task or any wrapper around it.
        horizon: Chunk horizon H (rows).
    """

    def __init__(self, env: Any, horizon: int) -> None:
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        self.task = getattr(env, "unwrapped", env)
        if not hasattr(self.task, "expert_chunk"):
            raise TypeError(f"{type(self.task).__name__} has no expert_chunk(horizon, env_ids)")
        self.horizon = int(horizon)

    def __call__(self, obs: torch.Tensor, env_ids: torch.Tensor) -> torch.Tensor:
        return self.task.expert_chunk(self.horizon, env_ids)
