"""The language planner's network: :class:`GroundedChunkHead` grounds the instruction
embedding on one of the observation's object slots and plans a bounded ``(H, A)`` chunk."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from edgerl.policies.bc_planner import init_bounded_mlp
from edgerl.policies.language.config import LanguagePlannerConfig
from edgerl.policies.language.instructions import make_task_env, slot_layout

__all__ = ["GroundedChunkHead", "untrained_head"]


class GroundedChunkHead(nn.Module):
    """``(obs (B, O), embedding (B, C)) -> chunk (B, H, A)``: ground the instruction on an
    object slot, then plan from the robot state and the grounded object.

    ``w = softmax(W e + b)`` over the ``K`` object slots of the observation (slot ``k`` =
    ``obs[slot_index[k]]``, ``S`` values each); the grounded object is ``sum_k w_k slot_k``;
    an MLP on ``[robot state | grounded object]`` (normalised) gives ``center + half *
    tanh(.)`` so every row lies inside the action limits.

    Why not a plain MLP on ``[obs | embedding]`` (:class:`~edgerl.policies.bc_planner.
    BCChunkPlanner` with ``cond_dim``): choosing one target's coordinates by the instruction is
    a multiplicative gate an MLP learns poorly from demos (measured on arm_reach, see
    docs/planner.md); the soft selection makes it a linear read-out of the embedding.

    Args:
        robot_index: Observation indices of the robot state (R,).
        slot_index: ``(K, S)`` observation indices of the object slots.
        embed_dim: Instruction embedding size C.
        horizon / action_dim: Chunk shape.
        action_low / action_high: Action limits (A,).
        hidden_dims: MLP sizes.
    """

    def __init__(self, obs_dim: int, robot_index: list[int], slot_index: list[list[int]],
                 embed_dim: int, horizon: int, action_dim: int, action_low: list[float],
                 action_high: list[float], hidden_dims: list[int] | tuple[int, ...] = (256, 256)
                 ) -> None:
        super().__init__()
        self.obs_dim, self.embed_dim = obs_dim, embed_dim
        self.horizon, self.action_dim = horizon, action_dim
        self.robot_list, self.slot_list = list(robot_index), [list(s) for s in slot_index]
        self.hidden_dims = list(hidden_dims)
        self.register_buffer("robot_index", torch.as_tensor(self.robot_list, dtype=torch.int64))
        self.register_buffer("slot_index", torch.as_tensor(self.slot_list, dtype=torch.int64))
        n_slots, slot_dim = self.slot_index.shape
        self.ground = nn.Linear(embed_dim, n_slots)
        init_bounded_mlp(self, len(self.robot_list) + slot_dim, self.hidden_dims,
                         horizon * action_dim, action_low, action_high)

    def grounding_logits(self, embedding: torch.Tensor) -> torch.Tensor:
        """``(B, K)`` slot scores of the instruction."""
        return self.ground(embedding)

    def features(self, obs: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        """``[robot state | grounded object]`` before normalisation, ``(B, R + S)``."""
        w = torch.softmax(self.grounding_logits(embedding), dim=-1)  # (B, K)
        slots = obs[:, self.slot_index]  # (B, K, S)
        goal = (w.unsqueeze(-1) * slots).sum(1)
        return torch.cat([obs[:, self.robot_index], goal], dim=-1)

    def set_input_stats(self, feats: torch.Tensor) -> None:
        self.in_mean.copy_(feats.mean(0))
        self.in_std.copy_(feats.std(0).clamp_min(1e-3))

    def forward(self, obs: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        z = self.mlp((self.features(obs, embedding) - self.in_mean) / self.in_std)
        z = z.view(obs.shape[0], self.horizon, self.action_dim)
        return self.act_center + self.act_half * torch.tanh(z)

    def config(self) -> dict[str, Any]:
        """Constructor arguments (JSON)."""
        return {"obs_dim": self.obs_dim, "robot_index": self.robot_list,
                "slot_index": self.slot_list, "embed_dim": self.embed_dim,
                "horizon": self.horizon, "action_dim": self.action_dim,
                "action_low": (self.act_center - self.act_half).tolist(),
                "action_high": (self.act_center + self.act_half).tolist(),
                "hidden_dims": self.hidden_dims}


def untrained_head(cfg: LanguagePlannerConfig, embed_dim: int = 384
                   ) -> tuple[GroundedChunkHead, Any]:
    """A randomly initialised head for ``cfg.task`` and the task's ``TaskSpec`` (for latency
    benchmarks: inference cost does not depend on the weights)."""
    env = make_task_env(cfg.task, 1, cfg.seed)
    spec = env.spec
    env.close()
    robot_index, slot_index = slot_layout(cfg.task, spec.obs_names)
    head = GroundedChunkHead(spec.obs_dim, robot_index, slot_index, embed_dim, cfg.horizon,
                             spec.action_dim, spec.action_low, spec.action_high,
                             hidden_dims=cfg.hidden_dims).eval()
    return head, spec
