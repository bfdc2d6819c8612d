"""MuJoCo tasks with a language instruction per env (``spec.instructions``)."""

from __future__ import annotations

import numpy as np
import torch

from edgerl.sim.mujoco.task_env import MujocoTaskEnv

__all__ = ["InstructedTaskEnv"]


class InstructedTaskEnv(MujocoTaskEnv):
    """A :class:`MujocoTaskEnv` with one instruction per env (``spec.instructions``).

    Subclasses keep :attr:`instruction_id` (int64 (N,), index into ``spec.instructions``)
    and may react to :meth:`set_instruction` in :meth:`_instruction_changed`.
    """

    instruction_id: np.ndarray

    def instruction(self, env_id: int) -> str:
        """The canonical instruction text of env ``env_id``."""
        return self.spec.instructions[int(self.instruction_id[int(env_id)])]

    def instruction_ids(self) -> torch.Tensor:
        """int64 (N,) instruction ids on ``device``."""
        return self._tensor(self.instruction_id)

    def set_instruction(self, env_ids: torch.Tensor | np.ndarray, ids: torch.Tensor | np.ndarray
                        ) -> None:
        """Override the instruction of ``env_ids`` (e.g. to evaluate one instruction)."""
        env_ids = np.asarray(torch.as_tensor(env_ids).cpu(), dtype=np.int64).reshape(-1)
        ids = np.asarray(torch.as_tensor(ids).cpu(), dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= len(self.spec.instructions)):
            raise ValueError(f"instruction ids must be in [0, {len(self.spec.instructions)}), "
                             f"got {ids.tolist()}")
        self.instruction_id[env_ids] = ids
        self._instruction_changed(env_ids)

    def _instruction_changed(self, env_ids: np.ndarray) -> None:
        """Hook after :meth:`set_instruction` wrote ``instruction_id[env_ids]`` (default none)."""
        return None
