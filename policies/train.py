"""One training run: task + planner + method wrappers + rsl_rl PPO -> a run directory.

Run directory layout (``runs/{task}__{method}__d{D}__s{S}__{YYYYmmdd-HHMMSS}/``)::

    config.json       {"train": TrainConfig, "resolved": {...}, "task_spec": TaskSpec,
                       "rsl_rl": the OnPolicyRunner cfg dict}
    model_{it}.pt     rsl_rl checkpoints (learned methods)
    metrics.jsonl     one line per PPO iteration (see edgerl.policies.ppo_runner)
    events.out.tfevents.*   TensorBoard
    planner.pt        BC planner weights (``--planner bc``) + its demo/fit log in config.json
    summary.json      wall time, env steps, final metrics
"""

from __future__ import annotations

import copy
import json
import logging
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from edgerl.contract.serde import to_dict
from edgerl.policies.config import CONFIG_NAME, PLANNER_NAME, TrainConfig

__all__ = ["CONFIG_NAME", "PLANNER_NAME", "SUMMARY_NAME", "TrainResult", "new_run_dir",
           "seed_everything", "train"]

log = logging.getLogger(__name__)

SUMMARY_NAME = "summary.json"


@dataclass
class TrainResult:
    """What :func:`train` produced."""

    run_dir: Path
    history: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0
    env_steps: int = 0
    #: The trained rsl_rl actor (``MLPModel``, eval mode) for in-process use; not saved.
    policy: Any = None

    def final(self) -> dict[str, Any]:
        """The last metrics row (empty for non-learning methods)."""
        return self.history[-1] if self.history else {}


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch."""
    random.seed(seed)
    np.random.seed(seed % (2**32))  # noqa: NPY002 (seeds third-party code using the legacy API)
    torch.manual_seed(seed)


def new_run_dir(cfg: TrainConfig, root: str | Path = "runs") -> Path:
    """A fresh ``root/{task}__{method}__d{D}__s{S}__{stamp}`` (suffix ``-1``.. on clashes)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = Path(root) / cfg.run_name(stamp)
    path, k = base, 0
    while path.exists():
        k += 1
        path = base.with_name(f"{base.name}-{k}")
    return path


def scale_output_layer(mlp: torch.nn.Module, scale: float) -> None:
    """Multiply the last ``Linear``'s weights by ``scale`` and zero its bias (no-op at 1)."""
    if scale == 1.0:
        return
    last = [m for m in mlp.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():
        last.weight.mul_(scale)
        last.bias.zero_()


def _resolved(cfg: TrainConfig, spec: Any) -> dict[str, Any]:
    return {"horizon": cfg.resolved_horizon, "period_steps": cfg.resolved_period,
            "residual_bound": cfg.resolved_residual_bound(spec.action_low, spec.action_high),
            "delay_ms": 1000.0 * cfg.delay_steps / spec.control_hz,
            "control_hz": spec.control_hz}


def critic_groups(env: Any) -> list[str]:
    """The critic's observation groups: the policy's own, plus the robot observation and the
    task's privileged ``"critic"`` group when the wrapped env has them (the planner-only goal
    reaches the value function, never the deployed actor)."""
    groups = set(env.get_observations().keys())
    return ["policy"] + [g for g in ("robot", "critic") if g in groups]


def _rank_config(cfg: TrainConfig, local_rank: int) -> TrainConfig:
    """``cfg`` for one torchrun process: ``cuda`` becomes ``cuda:{LOCAL_RANK}``."""
    dev = torch.device(cfg.device)
    if dev.type != "cuda" or dev.index == local_rank:
        return cfg
    return TrainConfig.from_dict({**cfg.to_dict(), "device": f"cuda:{local_rank}"})


def edit_teacher(cfg: TrainConfig, planner_net: Any) -> tuple[Any, str]:
    """The edit's teacher, ``teacher(env) -> (N, A)``, and its name: for an intent planner its
    decoder on the fresh fast observation and the held chunk's intent
    (:func:`~edgerl.policies.distill.intent_teacher`), for another BC planner the planner
    without delay (its fresh chunk); the task's expert action for the scripted planner and for
    a planner that reads the committed prefix (whose first rows continue the prefix rather
    than act on the state)."""
    from edgerl.policies.distill import intent_teacher, planner_teacher

    if planner_net is not None and not cfg.prefix_conditioned:
        if planner_net.intent_dim and cfg.distill.teacher == "intent":
            return intent_teacher(planner_net), "bc planner's decoder on the held intent"
        return planner_teacher(planner_net.plan_fn()), "bc planner, no delay"

    return privileged_expert, "task expert"


def privileged_expert(wrapped: Any) -> torch.Tensor:
    """The task's privileged expert command ``(N, A)`` for the envs under ``wrapped`` now."""
    return wrapped.unwrapped.expert_action()


def rate_reference(env: Any, teacher: Any, source: str) -> tuple[Any, str]:
    """Whose command rate bounds the deployed edit's: the task's privileged expert (the
    no-delay upper bound the planner learned from) when it has one, else the teacher."""
    if callable(getattr(getattr(env, "unwrapped", env), "expert_action", None)):
        return privileged_expert, "task expert"
    return teacher, source


def _warm_start(env: Any, runner: Any, cfg: TrainConfig, teacher: Any, source: str,
                show_progress: bool) -> dict[str, Any]:
    """DAgger warm start of the edit actor from ``teacher`` (:mod:`edgerl.policies.distill`),
    then the actor's exploration std set to ``distill.init_std``; what ``config.json``
    records."""
    from edgerl.policies.distill import distill_actor

    t0 = time.perf_counter()
    actor = runner.alg.get_policy()
    losses = distill_actor(env, actor, teacher, cfg.distill, seed=cfg.seed,
                           show_progress=show_progress)
    dist = actor.distribution
    with torch.no_grad():
        if getattr(dist, "std_type", "scalar") == "log":
            dist.log_std_param.fill_(math.log(cfg.distill.init_std))
        else:
            dist.std_param.fill_(cfg.distill.init_std)
    return {"teacher": source, "losses": losses, "wall_s": round(time.perf_counter() - t0, 3)}


def _learn(runner: Any, cfg: TrainConfig, env: Any, teacher: Any, source: str,
           document: dict[str, Any], show_progress: bool) -> dict | None:
    """The learned part of a run: the edit's warm start, the critic's warm-up, PPO (an edit
    paying for a command jerkier than its teacher's); the warm-start actor state, if any."""
    warmup, warm_state = 0, None
    if cfg.is_edit and cfg.distill.rounds:
        document["distill"] = _warm_start(env, runner, cfg, teacher, source, show_progress)
        warmup = min(cfg.distill.critic_warmup, cfg.iterations)
        warm_state = copy.deepcopy(runner.alg.get_policy().state_dict())
    if cfg.is_edit and cfg.smooth_weight > 0:
        from edgerl.policies.smoothness import RatePenalty

        runner.env = RatePenalty(env, teacher, cfg.smooth_weight)
    if warmup:
        actor_params = list(runner.alg.get_policy().parameters())
        for p in actor_params:
            p.requires_grad_(False)
        runner.learn(warmup)
        for p in actor_params:
            p.requires_grad_(True)
    runner.learn(cfg.iterations - warmup)
    return warm_state


def _guard(cfg: TrainConfig, runner: Any, planner_net: Any, warm_state: dict | None,
           run_dir: Path, teacher: Any, source: str) -> dict[str, Any]:
    """Choose the deployed edit actor on validation episodes (:mod:`edgerl.policies.guard`):
    the final, the best-training, the warm-start and the zero-residual (planner alone)
    actors."""
    from edgerl.policies.guard import select_deployed, zero_residual
    from edgerl.policies.methods import make_base_env, make_method_env
    from edgerl.policies.ppo_runner import BEST_NAME

    actor = runner.alg.get_policy()
    final = copy.deepcopy(actor.state_dict())
    candidates = {"final": final, "planner": zero_residual(final)}
    best = run_dir / BEST_NAME
    if best.is_file():
        candidates["best"] = torch.load(best, map_location=cfg.device,
                                        weights_only=False)["actor_state_dict"]
    if warm_state is not None:
        candidates["warm"] = warm_state
    seed = cfg.seed + cfg.guard.seed_offset
    env = make_method_env(make_base_env(cfg, cfg.num_envs, seed=seed), cfg, planner_net,
                          seed=seed)
    try:
        reference, name = rate_reference(env, teacher, source)
        return select_deployed(env, actor, candidates, cfg.guard, run_dir, reference, name)
    finally:
        env.close()


def train(cfg: TrainConfig, out: str | Path | None = None, root: str | Path = "runs",
          show_progress: bool = True) -> TrainResult:
    """Train ``cfg`` (or just set up and save a non-learning baseline); returns the run.

    Args:
        cfg: The run's configuration.
        out: Run directory (created; must be empty if it exists); default: a new one under
            ``root`` named by :meth:`TrainConfig.run_name`.
        root: Parent of auto-named run directories.
        show_progress: tqdm bars for demos, BC fitting and PPO.

    Under ``torchrun`` (WORLD_SIZE > 1) every process trains ``cfg.num_envs`` envs seeded
    ``seed + RANK`` on ``cuda:{LOCAL_RANK}`` (or the CPU, gloo); rsl_rl averages the
    gradients, and only rank 0 writes the run directory.
    """
    from edgerl.policies.methods import build_planner, make_base_env, make_method_env
    from edgerl.policies.ppo_runner import distributed_env, init_distributed

    rank, world, local = distributed_env()  # torchrun: every rank trains, rank 0 writes
    if world > 1:
        cfg = _rank_config(cfg, local)
        init_distributed(cfg.device)
    lead = rank == 0
    run_dir = Path(out) if out is not None else new_run_dir(cfg, root)
    if lead and run_dir.exists() and any(run_dir.iterdir()):
        raise FileExistsError(f"{run_dir}: run directory exists and is not empty")
    if lead:
        run_dir.mkdir(parents=True, exist_ok=True)
    seed_everything(cfg.seed + rank)
    t0 = time.perf_counter()
    base = make_base_env(cfg, cfg.num_envs, seed=cfg.seed + rank)
    spec = base.spec
    planner_net, planner_info = None, {}
    if cfg.uses_planner or (cfg.is_edit and cfg.distill.rounds and cfg.planner == "bc"):
        planner_net, planner_info = build_planner(cfg, show_progress=show_progress)
        if planner_net is not None and world > 1:  # every rank plans with rank 0's net
            for tensor in planner_net.state_dict().values():
                torch.distributed.broadcast(tensor, src=0)
        if planner_net is not None and lead:
            torch.save(planner_net.state_dict(), run_dir / PLANNER_NAME)
    env = make_method_env(base, cfg, planner_net)
    rsl_cfg = cfg.rsl_rl_cfg(critic_groups(env)) if cfg.learned else None
    document = {"train": cfg.to_dict(), "resolved": _resolved(cfg, spec),
                "task_spec": to_dict(spec), "planner": planner_info, "rsl_rl": rsl_cfg}
    if lead:
        (run_dir / CONFIG_NAME).write_text(json.dumps(document, indent=2) + "\n")
    result = TrainResult(run_dir=run_dir)
    try:
        if cfg.learned:
            from edgerl.policies.ppo_runner import EdgeRunner

            runner = EdgeRunner(env, rsl_cfg, log_dir=run_dir if lead else None,
                                device=cfg.device,
                                total_iterations=cfg.iterations, show_progress=show_progress,
                                stop_at_success=cfg.stop_at_success)
            scale_output_layer(runner.alg.get_policy().mlp, float(cfg.actor.output_scale))
            teacher, source = edit_teacher(cfg, planner_net)
            warm_state = _learn(runner, cfg, env, teacher, source, document, show_progress)
            if lead:
                (run_dir / CONFIG_NAME).write_text(json.dumps(document, indent=2) + "\n")
            if cfg.is_edit and cfg.guard.episodes and lead:
                document["guard"] = _guard(cfg, runner, planner_net, warm_state, run_dir,
                                           teacher, source)
                (run_dir / CONFIG_NAME).write_text(json.dumps(document, indent=2) + "\n")
            result.history = runner.history
            result.env_steps = runner.logger.tot_timesteps
            result.policy = runner.get_inference_policy(cfg.device)
    finally:
        close = getattr(env, "close", None)
        if close is not None:
            close()
    result.wall_s = time.perf_counter() - t0
    summary = {"wall_s": round(result.wall_s, 3), "env_steps": result.env_steps,
               "iterations": len(result.history), "final": result.final()}
    if lead:
        (run_dir / SUMMARY_NAME).write_text(json.dumps(summary, indent=2) + "\n")
    log.info("run %s: %d iterations, %d env steps in %.1f s", run_dir, len(result.history),
             result.env_steps, result.wall_s)
    return result
