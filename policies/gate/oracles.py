"""Privileged gate rules: how much a state-dependent gate could win on a scenario at all.

Before a gate is trained on a scenario, the margin a state-dependent choice can have over the
chunk-age heuristic is measured with rules that read what no deployed gate sees (the oracle
margin): :func:`curvature_rule` looks at the road's true curvature ahead of the car and
:func:`kick_rule` knows when a disturbance (``GateCfg.kick_*``) started. If even these do not
beat the tuned heuristic, a learned gate cannot be expected to, and the scenario, not the
gate, is what must change. ``python -m edgerl.apps.experiments.probes.gate_oracle`` runs them.

Both are :data:`~edgerl.policies.gate.baselines.GatePolicy` callables on a driving
:class:`~edgerl.sim.gate.env.GatedEnv`.
"""

from __future__ import annotations

from typing import Any

import torch

from edgerl.contract.timing import max_planner_delay
from edgerl.policies.gate.baselines import GatePolicy, ask_or_keep
from edgerl.sim.gate.env import GatedEnv

__all__ = ["curvature_rule", "kick_rule", "road_task"]


def road_task(env: GatedEnv) -> Any:
    """The driving task under the gate's wrappers (the object with ``road`` and ``state``);
    ``TypeError`` for a task without a road."""
    e: Any = env.env
    while not hasattr(e, "road"):
        if not hasattr(e, "env"):
            raise TypeError(f"{type(env.unwrapped).__name__} has no road: the curvature rule "
                            f"needs the driving task")
        e = e.env
    return e


def curvature_rule(look_m: float, threshold: float, sharp: tuple[int, int],
                   calm: tuple[int, int], samples: int = 8) -> GatePolicy:
    """Privileged: ``sharp`` = (budget, X) when the road's |curvature| (1/m) exceeds
    ``threshold`` anywhere in the next ``look_m`` metres ahead of the ego car, else ``calm``;
    the chosen budget is asked when the running plan is older than its X (steps) or there is
    none, and nothing is in flight; ``keep`` otherwise."""

    def policy(env: GatedEnv, obs: Any) -> torch.Tensor:
        task = road_task(env)
        s = env.scheduler
        x = task.state.x[:, 0]
        ahead = x[:, None] + torch.linspace(0.0, float(look_m), samples, device=x.device)
        is_sharp = task.road.curvature(ahead).abs().amax(dim=1) > threshold
        age = s.age_steps()
        limit = torch.where(is_sharp, torch.full_like(age, sharp[1]),
                            torch.full_like(age, calm[1]))
        budget = torch.where(is_sharp, torch.full_like(s.t, sharp[0]),
                             torch.full_like(s.t, calm[0]))
        return ask_or_keep(env, ~env.has_plan() | (age > limit), budget)

    return policy


def kick_rule(budget: int, max_age: int, react_steps: int, kick_budget: int | None = None,
              wait: int = 0) -> GatePolicy:
    """Privileged: ask ``budget`` when the running plan is older than ``max_age`` steps, when
    there is none, or when it runs out before a plan of ``budget`` asked now would arrive
    (rows left <= its delay), while nothing is in flight; and ask ``kick_budget`` (default
    ``budget``) once a kick started ``wait`` steps ago or more (within ``react_steps`` steps
    after that) when neither the running plan nor one in flight was observed after the kick's
    start + ``wait`` (they cannot know of it; ``wait`` = the kick's length lets a kick end
    before the plan that answers it is made); a plan in flight does not hold that back (the
    newer plan replaces it)."""
    fix = budget if kick_budget is None else int(kick_budget)

    def policy(env: GatedEnv, obs: Any) -> torch.Tensor:
        s = env.scheduler
        age, since = s.age_steps(), env.kick_age - int(wait)
        answered = (s.fly_valid & (s.fly_obs_step >= (s.t - since)[:, None])).any(dim=1)
        kicked = (since >= 0) & (since < react_steps) & (age > since) & ~answered
        rows_left = env.cur_rows - s.row_index()
        delay = max_planner_delay(env.budgets[budget].latency)
        due = ~env.has_plan() | (age > max_age) | (rows_left <= delay)
        routine = ask_or_keep(env, due, budget)
        return torch.where(kicked, torch.full_like(routine, fix), routine)

    return policy
