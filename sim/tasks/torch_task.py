"""The VecEnv side the torch tasks (``cartpole``, ``driving``) share: observations, and resets
by env ids, over two hooks each task writes.

A torch task keeps its state in ``(num_envs, ...)`` tensors; :meth:`TorchTaskEnv.reset` turns
``env_ids=None`` into every env, skips an empty selection, and hands the ids to the task's
:meth:`~TorchTaskEnv._reset_ids`; both VecEnv methods return :meth:`~TorchTaskEnv._obs`.
"""

from __future__ import annotations

import abc

import torch
from tensordict import TensorDict

from edgerl.sim.vec_env import EdgeVecEnv

__all__ = ["TorchTaskEnv"]


class TorchTaskEnv(EdgeVecEnv):
    """Base of the torch tasks: ``get_observations`` and ``reset`` over :meth:`_obs` and
    :meth:`_reset_ids`."""

    @abc.abstractmethod
    def _obs(self) -> TensorDict:
        """The current observations: ``"policy"`` of shape (num_envs, O), a fresh tensor."""

    @abc.abstractmethod
    def _reset_ids(self, env_ids: torch.Tensor) -> None:
        """Start a new episode in the envs ``env_ids`` (int64, (n,), n >= 1, on ``device``)."""

    def get_observations(self) -> TensorDict:
        return self._obs()

    def reset(self, env_ids: torch.Tensor | None = None) -> TensorDict:
        if env_ids is None:
            env_ids = torch.arange(self.num_envs, device=self.device)
        if int(env_ids.numel()):
            self._reset_ids(env_ids)
        return self._obs()
