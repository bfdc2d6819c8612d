"""Training of the language-conditioned chunk planner (MiniLM instruction embedding + robot
obs -> (H, A) chunk).

Training (:func:`train_language_planner`): the task's scripted expert is rolled out
(:func:`~edgerl.policies.bc_planner.collect_expert_demos`, DART noise on the executed action);
each sample's conditioning is the embedding of a *training* paraphrase of that env's
instruction, drawn at random per sample, so the head learns the instruction's meaning rather
than one phrasing. The head (:class:`GroundedChunkHead`) grounds the instruction on one of the
observation's object slots and plans from the robot state and that object; it is trained by
behaviour cloning (:func:`fit_grounded_head`, with the BC planner's chunk labels and loss
scaling) plus an auxiliary grounding cross-entropy.

Evaluation (:func:`evaluate_language_planner`): the planner alone, no delay: every ``period``
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch
from torch import nn

from edgerl.contract.logs import progress
from edgerl.policies.bc_planner import chunk_labels, collect_expert_demos
from edgerl.policies.language.config import LanguagePlannerConfig
from edgerl.policies.language.head import GroundedChunkHead
from edgerl.policies.language.instructions import (
    instruction_ids,
    instruction_sets,
    make_task_env,
    slot_layout,
)
from edgerl.policies.language_encoder import SentenceEncoder, load_encoder
from edgerl.runtime.planners.local.language import InstructionTokenizer

__all__ = ["collect_language_demos", "fit_grounded_head", "train_language_planner"]

log = logging.getLogger(__name__)


def collect_language_demos(env: Any, steps: int, noise: float, seed: int,
                           show_progress: bool = True) -> tuple[Any, torch.Tensor]:
    """Expert demos plus the instruction id of every sample, ``(T, N)`` int64.

    The id at step ``k`` is read before the step (an auto-reset after the step draws a new one
    for the next episode), by stepping the env through a thin recording shim.
    """
    ids: list[torch.Tensor] = []

    class _Recorder:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        def step(self, actions: torch.Tensor) -> Any:
            ids.append(instruction_ids(self._inner))
            return self._inner.step(actions)

    demos = collect_expert_demos(_Recorder(env), steps, noise=noise, seed=seed,
                                 show_progress=show_progress)
    return demos, torch.stack(ids)


def fit_grounded_head(head: GroundedChunkHead, obs: torch.Tensor, embeddings: torch.Tensor,
                      instruction_ids: torch.Tensor, targets: torch.Tensor, *, epochs: int,
                      batch_size: int, learning_rate: float, grounding_weight: float = 0.1,
                      seed: int = 0, show_progress: bool = True) -> list[float]:
    """Behaviour cloning: chunk MSE (scaled by the action half-range, as ``fit_bc``) plus
    ``grounding_weight`` x cross-entropy of the slot scores against the demo's instruction id.

    ``obs (M, O)``, ``embeddings (M, C)``, ``instruction_ids (M,)``, ``targets (M, H, A)``.
    Returns the mean loss per epoch.
    """
    with torch.no_grad():
        onehot = torch.nn.functional.one_hot(instruction_ids, head.slot_index.shape[0]).float()
        slots = obs[:, head.slot_index]
        true_goal = (onehot.unsqueeze(-1) * slots).sum(1)
        head.set_input_stats(torch.cat([obs[:, head.robot_index], true_goal], dim=-1))
    opt = torch.optim.Adam(head.parameters(), lr=learning_rate)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    gen = torch.Generator().manual_seed(int(seed))
    m = obs.shape[0]
    losses: list[float] = []
    head.train()
    for _ in progress(range(epochs), total=epochs, desc="language planner",
                      disable=not show_progress or None):
        perm = torch.randperm(m, generator=gen)
        total = 0.0
        for start in range(0, m, batch_size):
            idx = perm[start:start + batch_size]
            pred = head(obs[idx], embeddings[idx])
            loss = (((pred - targets[idx]) / head.act_half) ** 2).mean()
            loss = loss + grounding_weight * nn.functional.cross_entropy(
                head.grounding_logits(embeddings[idx]), instruction_ids[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * idx.numel()
        sched.step()
        losses.append(total / m)
    head.eval()
    log.info("language planner: loss %.4g -> %.4g over %d epochs (%d samples)", losses[0],
             losses[-1], epochs, m)
    return losses


def train_language_planner(cfg: LanguagePlannerConfig, *, encoder: SentenceEncoder | None = None,
                           tokenizer: InstructionTokenizer | None = None,
                           show_progress: bool = True
                           ) -> tuple[GroundedChunkHead, dict[str, Any]]:
    """Collect demos, fit the head; returns ``(head, info)`` (info is JSON: sizes, losses)."""
    if encoder is None or tokenizer is None:
        encoder, tokenizer = load_encoder()
    t_start = time.perf_counter()
    train_set, _ = instruction_sets(cfg.task, encoder, tokenizer, cfg.n_held_out)
    env = make_task_env(cfg.task, cfg.demo_envs, cfg.seed + 10_000)
    spec = env.spec
    demos, ids = collect_language_demos(env, cfg.demo_steps, cfg.expert_noise, cfg.seed,
                                        show_progress)
    env.close()
    labels = chunk_labels(demos.actions, demos.dones, cfg.horizon)  # (T, N, H, A)
    low = torch.as_tensor(spec.action_low, dtype=torch.float32)
    high = torch.as_tensor(spec.action_high, dtype=torch.float32)
    labels = torch.maximum(torch.minimum(labels, high), low)
    gen = torch.Generator().manual_seed(cfg.seed)
    flat_ids = ids.reshape(-1)
    k = torch.randint(0, train_set.embeddings.shape[1], flat_ids.shape, generator=gen)
    cond = train_set.embeddings[flat_ids, k]  # (M, 384): a random training phrasing each
    robot_index, slot_index = slot_layout(cfg.task, spec.obs_names)
    head = GroundedChunkHead(spec.obs_dim, robot_index, slot_index, cond.shape[-1], cfg.horizon,
                             spec.action_dim, spec.action_low, spec.action_high,
                             hidden_dims=cfg.hidden_dims)
    losses = fit_grounded_head(head, demos.obs.reshape(-1, spec.obs_dim), cond, flat_ids,
                               labels.reshape(-1, cfg.horizon, spec.action_dim),
                               epochs=cfg.epochs, batch_size=cfg.batch_size,
                               learning_rate=cfg.learning_rate, seed=cfg.seed,
                               show_progress=show_progress)
    info = {"samples": int(flat_ids.numel()), "loss_first": losses[0], "loss_last": losses[-1],
            "train_phrasings": train_set.flat(), "train_s": time.perf_counter() - t_start,
            "net": head.config()}
    return head, info
