"""The trained language planner behind the interfaces that use it: the sim wrappers' batched
planner callable (in process, :class:`LanguagePlanFn`, or served, :class:`RemotePlanFn`) and
the runtime's single-sample :class:`~edgerl.contract.planner.Planner`
(:class:`LanguageChunkPlanner`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.planner import PlannerHealth, PlannerInfo
from edgerl.policies.language.head import GroundedChunkHead
from edgerl.policies.language.instructions import InstructionSet, instruction_ids
from edgerl.policies.language_encoder import SentenceEncoder
from edgerl.runtime.planners.local.language import InstructionTokenizer

__all__ = ["LanguageChunkPlanner", "LanguagePlanFn", "RemotePlanFn"]


class LanguagePlanFn:
    """The language planner as the sim wrappers' batched planner callable
    (``edgerl.sim.wrappers.PlanFn``): ``plan(obs (n, O), env_ids (n,)) -> (n, H, A)``.

    Env ``e`` is instructed with phrasing ``e % K`` of its current instruction (read from the
    base env's ``instruction_id``), so a training run on held-out phrasings exercises all.
    """

    def __init__(self, head: GroundedChunkHead, phrasings: InstructionSet, env: Any) -> None:
        self.head = head.eval()
        self.phrasings = phrasings
        self.env = env

    def __call__(self, obs: torch.Tensor, env_ids: torch.Tensor) -> torch.Tensor:
        ids = torch.as_tensor(env_ids).reshape(-1).cpu().long()
        instr = instruction_ids(self.env)[ids]
        emb = self.phrasings.embeddings[instr, ids % self.phrasings.embeddings.shape[1]]
        with torch.no_grad():
            return self.head(obs.detach().float().cpu(), emb).to(obs.device)


class RemotePlanFn:
    """A planner served by ``edgerl serve-planner`` as the sim wrappers' batched planner
    callable: one ``plan_batch`` round trip per call for all queried envs (Found-RL's
    training-time planner service: the planner runs in its own process, here or on a GPU box).

    ``client`` is a started :class:`~edgerl.runtime.planners.remote.planner.RemotePlanner`; env
    ``e``
    is instructed with phrasing ``e % K`` of its current instruction.
    """

    def __init__(self, client: Any, phrasings: InstructionSet, env: Any) -> None:
        self.client = client
        self.phrasings = phrasings
        self.env = env

    def __call__(self, obs: torch.Tensor, env_ids: torch.Tensor) -> torch.Tensor:
        ids = torch.as_tensor(env_ids).reshape(-1).cpu().long()
        instr = instruction_ids(self.env)[ids].tolist()
        k = self.phrasings.embeddings.shape[1]
        texts = [self.phrasings.texts[i][e % k] for i, e in zip(instr, ids.tolist())]
        chunks = self.client.plan_batch(obs.detach().float().cpu().numpy(), texts, now=0.0)
        return torch.from_numpy(chunks).to(obs.device)


class LanguageChunkPlanner:
    """Torch reference :class:`~edgerl.contract.planner.Planner`: encoder + head, single sample.

    ``plan(obs (O,), instruction, now)`` -> chunk with ``t0 = obs_time = now``. Embeddings are
    cached per instruction text. The ONNX bundle's
    :class:`~edgerl.runtime.planners.local.language.OnnxLanguagePlanner` is its deployed twin.
    """

    def __init__(self, head: GroundedChunkHead, encoder: SentenceEncoder,
                 tokenizer: InstructionTokenizer, dt_s: float, period_s: float,
                 expected_latency_s: float = 0.0) -> None:
        self.head = head.eval()
        self.encoder = encoder.eval()
        self.tokenizer = tokenizer
        self.info = PlannerInfo(horizon=head.horizon, action_dim=head.action_dim, dt_s=dt_s,
                                period_s=period_s, expected_latency_s=expected_latency_s)
        self._cache: dict[str, torch.Tensor] = {}

    def embed(self, instruction: str) -> torch.Tensor:
        if instruction not in self._cache:
            self._cache[instruction] = torch.from_numpy(
                self.encoder.embed([instruction], self.tokenizer)[0])
        return self._cache[instruction]

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        obs = torch.as_tensor(np.asarray(observation, np.float32).reshape(1, -1))
        if obs.shape[1] != self.head.obs_dim:
            raise ValueError(f"observation has {obs.shape[1]} values, expected "
                             f"{self.head.obs_dim}")
        with torch.no_grad():
            rows = self.head(obs, self.embed(instruction)[None])[0]
        return ActionChunk(actions=rows.numpy(), t0=now, dt=self.info.dt_s, obs_time=now,
                           source="language_planner")

    def health(self) -> PlannerHealth:
        return PlannerHealth.OK
