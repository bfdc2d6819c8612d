"""The edit policy's warm start: a student of the planner that has no delay (DAgger).

Before PPO, the edit actor learns to do what the planner would do if its chunk were fresh,
from the inputs the edit really has: the newest fast observation, the late chunk's rows, its
age and the planner's intent. In simulation the planner can be asked on the current
observation every step, so the teacher needs no privileged expert of its own: it is the same
planner, without delay (for the scripted ``expert`` planner, the task's expert action).

Each round rolls the current student in the latency-wrapped env (round 0 acts as the
teacher, so the data start where the teacher goes), labels every visited step with the
teacher's residual ``clip((teacher_row - chunk_row) / bound, -1, 1)`` (what the edit would
have to add to the chunk row to command the teacher's action), aggregates the data and fits
the actor's mean by regression (DAgger, Ross et al. 2011). PPO then fine-tunes the student
(EXPO-FT style: reinforcement learning on top of an imitation start), so training no longer
starts from a residual of zero on top of a late chunk, which on fast tasks is worse than
doing nothing.

The ablation ``edit_zero_chunks`` is warm-started from the same teacher through its own (zero)
chunks, so the two differ only in what the chunks carry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from edgerl.contract.logs import progress
from edgerl.policies.config import DistillConfig

__all__ = ["DistillConfig", "distill_actor", "planner_teacher"]

log = logging.getLogger(__name__)

#: ``teacher(env) -> (N, A)``: the action the teacher commands at the env's current step.
Teacher = Callable[[Any], torch.Tensor]


def planner_teacher(planner: Any) -> Teacher:
    """A teacher from a batched planner ``plan(obs (N, O), ids) -> (N, H, A)`` (or with an
    intent, ``(chunks, intent)``): row 0 of a chunk planned on the env's current robot
    observation (the ``"robot"`` group: what the planner would see, without its delay)."""

    def teach(env: Any) -> torch.Tensor:
        robot = env.get_observations()["robot"]
        ids = torch.arange(robot.shape[0], device=robot.device)
        answer = planner(robot, ids)
        chunks = answer[0] if isinstance(answer, tuple) else answer
        return chunks[:, 0]

    return teach


def _residual_target(env: Any, teacher_action: torch.Tensor) -> torch.Tensor:
    """``clip((teacher - chunk_row) / bound, -1, 1)`` (N, A): the edit residual that commands
    the teacher's action on top of the env's current chunk row."""
    bound = float(env.latency_cfg.edit_bound)
    row = env.current_row()
    if bound <= 0:
        return torch.zeros_like(row)
    return torch.clamp((teacher_action - row) / bound, -1.0, 1.0)


def distill_actor(env: Any, actor: Any, teacher: Teacher, cfg: DistillConfig, seed: int = 0,
                  show_progress: bool = True) -> list[float]:
    """Warm-start ``actor`` (an rsl_rl ``MLPModel`` reading the ``"policy"`` group) on
    ``env`` (a :class:`~edgerl.sim.wrappers.LatencyWrapper` running an edit method) as the
    student of ``teacher``. Returns the final regression loss of each round (residual units).
    """
    if cfg.rounds == 0:
        return []
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    xs: list[torch.Tensor] = []
    ys: list[torch.Tensor] = []
    losses: list[float] = []
    opt = torch.optim.Adam(actor.mlp.parameters(), lr=cfg.learning_rate)
    obs = env.get_observations()
    for rnd in progress(range(cfg.rounds), total=cfg.rounds, desc="distill",
                        disable=not show_progress or None):
        for _ in range(cfg.steps):
            target = _residual_target(env, teacher(env))
            actor.update_normalization(obs)
            xs.append(obs["policy"].detach().clone())
            ys.append(target.detach().clone())
            with torch.no_grad():
                act = target if rnd == 0 else actor(obs)
            obs, _, _, _ = env.step(act)
        x, y = torch.cat(xs), torch.cat(ys)
        losses.append(_fit(actor, opt, x, y, cfg, gen))
    log.info("distill: %d rounds, %d samples, loss %s", cfg.rounds, len(xs) * xs[0].shape[0],
             [round(v, 4) for v in losses])
    return losses


def _fit(actor: Any, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
         cfg: DistillConfig, gen: torch.Generator) -> float:
    """Regress the actor's mean on ``y`` over ``x`` for ``cfg.epochs``; the last epoch's loss."""
    m = x.shape[0]
    loss_sum = 0.0
    for _ in range(cfg.epochs):
        perm = torch.randperm(m, generator=gen).to(x.device)
        loss_sum, count = 0.0, 0
        for start in range(0, m, cfg.batch_size):
            idx = perm[start:start + cfg.batch_size]
            pred = actor.mlp(actor.obs_normalizer(x[idx]))
            loss = ((pred - y[idx]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += float(loss.detach()) * idx.numel()
            count += idx.numel()
        loss_sum /= max(count, 1)
    return loss_sum
