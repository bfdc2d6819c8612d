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

__all__ = ["DistillConfig", "distill_actor", "intent_teacher", "planner_teacher"]

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


def intent_teacher(planner: Any) -> Teacher:
    """A teacher the edit can match from its own inputs: an intent planner's decoder
    (:meth:`~edgerl.policies.bc_planner.BCChunkPlanner.decode`) on the env's newest robot
    observation (it reads only the fast elements) and the intent of the chunk the edit holds,
    row 0: the command the planner's head gives now from what the planner knew when it
    planned (its decoder is trained on such stale intents). Where no chunk is held yet, the
    planner without delay (:func:`planner_teacher`), which nothing the edit sees can know.

    The fresh planner's row also depends on the planner-only elements through a fresh intent
    the edit never sees; regressing on it leaves an error the student cannot remove (on a
    reaching task, misses by the target's radius). ``planner``: a ``BCChunkPlanner`` with
    ``intent_dim`` > 0."""
    fresh = planner_teacher(planner.plan_fn())

    def teach(env: Any) -> torch.Tensor:
        robot = env.get_observations()["robot"]
        s = env.scheduler
        with torch.no_grad():
            x = robot.to(planner.in_mean.device, torch.float32)
            rows = planner.decode(x, s.cur_intent.to(x))[:, 0].to(robot)
        return torch.where(s.has_chunk()[:, None], rows, fresh(env))

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
    student of ``teacher``. Returns the final imitation loss of each round (residual units).

    With ``cfg.smooth`` > 0 the regression also matches the command's change from one step to
    the next to the teacher's (the imitation error must not jump between consecutive steps),
    so the student's command is as smooth as its teacher's where it cannot be as exact.
    """
    if cfg.rounds == 0:
        return []
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    steps: list[dict[str, torch.Tensor]] = []  # one entry per rolled step, in order
    losses: list[float] = []
    opt = torch.optim.Adam(actor.mlp.parameters(), lr=cfg.learning_rate)
    bound = float(env.latency_cfg.edit_bound)
    obs = env.get_observations()
    fresh = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
    for rnd in progress(range(cfg.rounds), total=cfg.rounds, desc="distill",
                        disable=not show_progress or None):
        for _ in range(cfg.steps):
            action = teacher(env).detach()
            target = _residual_target(env, action)
            actor.update_normalization(obs)
            steps.append({"x": obs["policy"].detach().clone(), "y": target.detach().clone(),
                          "v": action.clone(), "row": env.current_row().detach().clone(),
                          "first": fresh.clone()})
            with torch.no_grad():
                act = target if rnd == 0 else actor(obs)
            obs, _, dones, _ = env.step(act)
            fresh = dones.to(torch.bool)
        fresh = torch.ones_like(fresh)  # the next round's first step pairs with nothing
        losses.append(_fit(actor, opt, _pairs(steps), cfg, bound, gen))
    log.info("distill: %d rounds, %d samples, loss %s", cfg.rounds,
             len(steps) * env.num_envs, [round(v, 4) for v in losses])
    return losses


def _pairs(steps: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Every rolled sample beside the one of the step before it (same env): ``x``, ``y``
    and ``x0``, ``y0``, the teacher's change ``dv`` and the chunk row's ``drow`` from that
    step, and ``linked`` (False where the sample starts an episode or a round)."""
    cat = {k: torch.cat([s[k] for s in steps]) for k in ("x", "y", "v", "row")}
    n = steps[0]["x"].shape[0]
    prev = {k: torch.cat([v[:n], v[:-n]]) for k, v in cat.items()}  # the step before
    # a sample that starts an episode or a round (``first``) follows no sample of its own,
    # nor does the data's first step
    linked = ~torch.cat([s["first"] for s in steps])
    linked[:n] = False
    return {"x": cat["x"], "y": cat["y"], "x0": prev["x"], "y0": prev["y"],
            "dv": cat["v"] - prev["v"], "drow": cat["row"] - prev["row"], "linked": linked}


def _fit(actor: Any, opt: torch.optim.Optimizer, data: dict[str, torch.Tensor],
         cfg: DistillConfig, bound: float, gen: torch.Generator) -> float:
    """Regress the actor's mean on the targets for ``cfg.epochs`` (plus the smoothness term);
    the last epoch's mean imitation loss."""
    x, y = data["x"], data["y"]
    m = x.shape[0]
    loss_sum = 0.0
    for _ in range(cfg.epochs):
        perm = torch.randperm(m, generator=gen).to(x.device)
        loss_sum, count = 0.0, 0
        for start in range(0, m, cfg.batch_size):
            idx = perm[start:start + cfg.batch_size]
            pred = actor.mlp(actor.obs_normalizer(x[idx]))
            imitation = ((pred - y[idx]) ** 2).mean()
            loss = imitation
            linked = data["linked"][idx]
            if cfg.smooth > 0 and bool(linked.any()):
                before = actor.mlp(actor.obs_normalizer(data["x0"][idx]))
                command_change = bound * (pred - before) + data["drow"][idx]
                gap = (command_change - data["dv"][idx])[linked]
                loss = loss + cfg.smooth * (gap / max(bound, 1e-6)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += float(imitation.detach()) * idx.numel()
            count += idx.numel()
        loss_sum /= max(count, 1)
    return loss_sum
