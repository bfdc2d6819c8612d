"""Build a method's env: which sim wrappers sit between the task and the policy.

What each method is (and every property the code asks of it) lives in the one registry,
:mod:`edgerl.contract.methods`. The wrappers themselves live in ``edgerl.sim.wrappers``; this
module only
chooses and configures them from a :class:`TrainConfig`, so training, evaluation and
:func:`edgerl.policies.runs.load_policy` build exactly the same env.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from edgerl.contract.edit_obs import EditObsConfig
from edgerl.contract.spec import LatencyModel
from edgerl.policies.bc_planner import (
    BCChunkPlanner,
    chunk_labels,
    collect_expert_demos,
    fit_bc,
    prefix_inputs,
    stale_inputs,
)
from edgerl.policies.config import TrainConfig
from edgerl.sim.vec_env import TaskSpec
from edgerl.sim.wrappers import ExpertPlanner, LatencyCfg, LatencyWrapper

__all__ = ["build_planner", "edit_obs_config", "latency_cfg", "latency_model", "make_base_env",
           "make_bc_planner", "make_method_env", "planner_callable"]

log = logging.getLogger(__name__)


def make_base_env(cfg: TrainConfig, num_envs: int, seed: int | None = None) -> Any:
    """The registered task (no wrappers) with ``num_envs`` envs, seeded."""
    from edgerl.sim.registry import make_task

    seed = cfg.seed if seed is None else seed
    return make_task(cfg.task, num_envs=num_envs, device=cfg.device, seed=seed,
                     **cfg.task_kwargs)


def make_bc_planner(cfg: TrainConfig, spec: Any, cond_dim: int = 0) -> BCChunkPlanner:
    """An untrained :class:`BCChunkPlanner` sized for ``cfg`` and the task ``spec`` (with an
    intent head of ``cfg.resolved_intent_dim`` whose decoder reads the task's fast subset)."""
    fast = list(spec.fast_obs_indices) if spec.planner_only else []
    return BCChunkPlanner(spec.obs_dim, spec.action_dim, cfg.resolved_horizon, spec.action_low,
                          spec.action_high, hidden_dims=cfg.bc.hidden_dims, cond_dim=cond_dim,
                          intent_dim=cfg.resolved_intent_dim, fast_indices=fast)


def build_planner(cfg: TrainConfig, show_progress: bool = True
                  ) -> tuple[BCChunkPlanner | None, dict[str, Any]]:
    """The learned planner for ``cfg.planner == "bc"`` (fit on fresh expert demos), else None.

    Returns ``(network or None, info)``; ``info`` (JSON) records the demo size and the BC loss
    curve and goes into ``config.json``.
    """
    if cfg.planner != "bc":
        return None, {"kind": "remote", "address": cfg.planner[len("remote:"):]} \
            if cfg.planner.startswith("remote:") else {"kind": "expert"}
    demo_env = make_base_env(cfg, cfg.bc.demo_envs, seed=cfg.seed + 10_000)
    demos = collect_expert_demos(demo_env, cfg.bc.demo_steps, noise=cfg.bc.expert_noise,
                                 seed=cfg.seed, show_progress=show_progress)
    demo_env.close()
    horizon = cfg.resolved_horizon
    labels = chunk_labels(demos.actions, demos.dones, horizon)
    inputs = demos.obs
    cond_dim = 0
    if cfg.prefix_conditioned:  # the committed prefix (real-time chunking)
        prefix = prefix_inputs(demos.executed, demos.dones, cfg.delay_steps)
        inputs = torch.cat([inputs, prefix], dim=-1)
        cond_dim = prefix.shape[-1]
    net = make_bc_planner(cfg, demo_env.spec, cond_dim).to(cfg.device)
    older = None
    if cfg.resolved_intent_dim and cfg.resolved_intent_stale_steps:
        gen = torch.Generator(device="cpu").manual_seed(int(cfg.seed) + 1)
        older = stale_inputs(inputs, demos.dones, cfg.resolved_intent_stale_steps, gen)
        older = older.reshape(-1, older.shape[-1])
    inputs = inputs.reshape(-1, inputs.shape[-1])
    targets = labels.reshape(-1, horizon, labels.shape[-1])
    losses = fit_bc(net, inputs, targets, epochs=cfg.bc.epochs, batch_size=cfg.bc.batch_size,
                    learning_rate=cfg.bc.learning_rate, seed=cfg.seed,
                    show_progress=show_progress, intent_inputs=older)
    info = {"kind": "bc", "net": net.config(), "samples": int(inputs.shape[0]),
            "loss_first": losses[0], "loss_last": losses[-1], "losses": losses}
    return net, info


def latency_model(cfg: TrainConfig) -> LatencyModel:
    """The :class:`LatencyModel` of ``cfg``: planner delay D and period P in control steps.

    For ``naive``/``arli`` the same D is the policy's inference delay (the wrapper's action
    queue); for ``nodelay`` it is 0.
    """
    return cfg.resolved_latency


def edit_obs_config(cfg: TrainConfig, spec: TaskSpec) -> EditObsConfig:
    """The edit observation layout for ``cfg`` on a task with ``spec`` (the wrapper builds the
    same one): ``spec.fast_obs_indices`` unless ``cfg.edit_inputs == "full"``."""
    d = LatencyCfg()
    fast = spec.fast_obs_indices if cfg.edit_inputs == "fast" and spec.planner_only else []
    return EditObsConfig(spec.obs_dim, spec.action_dim, cfg.lookahead, cfg.n_committed,
                         d.age_scale_s, d.age_clip, fast, intent_dim=cfg.resolved_intent_dim)


def latency_cfg(cfg: TrainConfig, spec: Any, seed: int) -> LatencyCfg:
    """The :class:`LatencyCfg` for ``cfg`` on a task with ``spec``."""
    return LatencyCfg(method=cfg.method, latency=latency_model(cfg),
                      horizon=cfg.resolved_horizon, lookahead=cfg.lookahead,
                      n_committed=cfg.n_committed,
                      edit_bound=cfg.resolved_residual_bound(spec.action_low, spec.action_high),
                      seed=seed, edit_inputs=cfg.edit_inputs, privileged=cfg.privileged,
                      intent_dim=cfg.resolved_intent_dim,
                      prefix_planner=cfg.planner_prefix and cfg.is_edit)


def make_method_env(base: Any, cfg: TrainConfig, planner_net: BCChunkPlanner | None = None,
                    seed: int | None = None) -> LatencyWrapper:
    """Wrap the task ``base`` for ``cfg.method`` (see the module table).

    ``seed`` seeds the wrapper's own generator (delay draws, phases); default ``cfg.seed``.
    """
    seed = cfg.seed if seed is None else seed
    planner = planner_callable(base, cfg, planner_net) if cfg.uses_planner else None
    return LatencyWrapper(base, latency_cfg(cfg, base.spec, seed), planner=planner)


def planner_callable(base: Any, cfg: TrainConfig, planner_net: BCChunkPlanner | None) -> Any:
    """The batched planner ``plan(obs (n, O), env_ids (n,)) -> (n, H, A)`` for the wrapper:
    the BC network when given, a planner service for ``remote:HOST:PORT``, else the task's
    ``expert_chunk`` rollout. ``rtc`` needs a planner that reads the committed prefix: a
    prefix-conditioned BC network."""
    if cfg.prefix_conditioned and (planner_net is None or planner_net.cond_dim == 0):
        raise ValueError(f"method {cfg.method!r} needs a planner that reads the committed "
                         "prefix: use --planner bc (the scripted expert cannot continue a "
                         "given prefix)")
    if planner_net is not None:
        return planner_net.plan_fn()
    if cfg.planner.startswith("remote:"):  # a planner service (policies/remote_planner.py)
        from edgerl.policies.remote_planner import ServedPlanFn

        return ServedPlanFn.connect(cfg.planner, cfg.resolved_horizon)
    return ExpertPlanner(base, cfg.resolved_horizon)
