"""Latency wrappers for any rsl_rl VecEnv: planner chunks, delays, edit/ARLI observations."""

from __future__ import annotations

from typing import Any

from edgerl.contract.timing import default_horizon
from edgerl.sim.wrappers.base import DelayLine, VecEnvWrapper, check_action_batch
from edgerl.sim.wrappers.chunk import (
    ChunkScheduler,
    PlanFn,
    max_planner_delay,
    required_horizon,
    sample_delays,
)
from edgerl.sim.wrappers.latency import LatencyWrapper
from edgerl.sim.wrappers.latency_config import CHUNK_METHODS, METHODS, LatencyCfg
from edgerl.sim.wrappers.planners import ExpertPlanner

__all__ = ["CHUNK_METHODS", "METHODS", "ChunkScheduler", "DelayLine", "ExpertPlanner",
           "LatencyCfg", "LatencyWrapper", "PlanFn", "VecEnvWrapper", "check_action_batch",
           "make_latency_env", "max_planner_delay", "required_horizon", "sample_delays"]


def make_latency_env(env: Any, cfg: LatencyCfg, planner: PlanFn | str | None = "expert"
                     ) -> LatencyWrapper:
    """Wrap ``env`` for ``cfg.method``; ``planner="expert"`` rolls out the task's expert.

    The expert planner's horizon is ``cfg.horizon`` or, when 0,
    ``edgerl.contract.timing.default_horizon`` (including the randomizer's extra latency), the
    horizon the wrapper itself would pick.
    """
    if cfg.method not in CHUNK_METHODS:
        planner = None
    elif planner == "expert":
        rand = getattr(getattr(env, "unwrapped", env), "randomizer", None)
        extra_max = int(rand.cfg.latency_steps[1]) if rand is not None else 0
        horizon = cfg.horizon or default_horizon(cfg.latency, cfg.lookahead, extra_max,
                                                 cfg.method, cfg.rtc_blend_steps)
        planner = ExpertPlanner(env, horizon)
    elif isinstance(planner, str):
        raise ValueError(f"unknown planner {planner!r}; pass 'expert' or a plan(obs, ids) "
                         f"callable")
    return LatencyWrapper(env, cfg, planner)
