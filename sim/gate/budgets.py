"""Planning budgets: what a planner can be asked for at a decision point, and at what delay.

A :class:`PlanBudget` is one discrete choice of the planning-budget gate
(:mod:`edgerl.sim.gate.env`): how long the plan takes to arrive (a ``LatencyModel`` in
control steps, e.g. the one ``edgerl bench planner --write-latency-model`` measured) and how
good it is. The plan is the task's privileged expert chunk (``expert_chunk``) degraded by the
budget's quality knobs, the stand-in for a planner with a size / refinement-step knob:

* ``horizon``: rows planned (a fast planner looks less far ahead);
* ``hold``: every ``hold``-th row is planned and held (a coarser plan, fewer steps);
* ``noise_std``: Gaussian noise on every row (action units; a less exact plan);
* ``gain``: every row is multiplied by it (< 1: a small model that underfits and shrinks its
  actions toward zero; harmless where little action is needed, wrong in sharp manoeuvres);
* ``compensate``: the plan starts from where the rows the robot executes during the delay
  (the committed prefix) lead, not from the state at the query (a delay-aware planner; the
  task's ``expert_chunk`` must take ``prefix``).

``keep`` (:data:`KEEP`) asks for nothing: the current chunk keeps running, at no cost.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from edgerl.contract.serde import from_dict
from edgerl.contract.spec import LatencyModel

__all__ = ["KEEP", "BudgetPlanner", "PlanBudget", "default_budgets", "load_budget_latencies"]


@dataclass(frozen=True)
class PlanBudget:
    """One planning budget.

    Attributes:
        name: Label in tables and CLI flags (unique within a budget set).
        delay: Control steps from the query to the chunk's arrival: an int, or a
            ``LatencyModel`` (its delay, jitter or measured distribution; period ignored).
        horizon: Rows the plan holds (>= 1 unless ``keep``).
        hold: Plan resolution: rows ``0, hold, 2 hold...`` are planned, each held ``hold``
            rows (1 = exact).
        noise_std: Std of Gaussian noise added to every row (action units).
        gain: Factor on every planned row (1 = exact; see the module doc).
        cost: Reward subtracted each time this budget is chosen (compute price).
        keep: No new plan: the current chunk keeps running.
        compensate: Plan from the committed prefix (see the module doc).
    """

    name: str
    delay: int | LatencyModel = 0
    horizon: int = 0
    hold: int = 1
    noise_std: float = 0.0
    cost: float = 0.0
    keep: bool = False
    compensate: bool = False
    gain: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.delay, Mapping):
            object.__setattr__(self, "delay", from_dict(LatencyModel, dict(self.delay), "delay"))
        if not self.keep and self.horizon < 1:
            raise ValueError(f"budget {self.name!r}: horizon must be >= 1, got {self.horizon}")
        if isinstance(self.delay, int) and self.delay < 0:
            raise ValueError(f"budget {self.name!r}: delay must be >= 0, got {self.delay}")
        if self.hold < 1 or self.noise_std < 0 or self.cost < 0 or not 0 <= self.gain <= 1:
            raise ValueError(f"budget {self.name!r}: hold must be >= 1, noise_std and cost "
                             f">= 0, gain in [0, 1]")

    @property
    def latency(self) -> LatencyModel:
        """The delay as a ``LatencyModel`` (period 1: the gate decides when to query)."""
        if isinstance(self.delay, LatencyModel):
            return dataclasses.replace(self.delay, planner_period_steps=1)
        return LatencyModel(planner_delay_steps=int(self.delay))

    def with_latency(self, latency: LatencyModel) -> PlanBudget:
        """This budget with its delay taken from a measured ``LatencyModel``."""
        return dataclasses.replace(self, delay=latency)


#: The "no new plan" budget.
KEEP = PlanBudget("keep", keep=True)


def default_budgets(fast_delay: int = 1, slow_delay: int = 8) -> tuple[PlanBudget, ...]:
    """``keep``, ``fast`` (short delay, short coarse noisy plan) and ``slow`` (long delay,
    long exact plan): the gate's default choices (delays in control steps)."""
    return (KEEP,
            PlanBudget("fast", delay=fast_delay, horizon=16, hold=4, noise_std=0.1, cost=0.02),
            PlanBudget("slow", delay=slow_delay, horizon=48, cost=0.02))


def load_budget_latencies(budgets: Sequence[PlanBudget], files: Mapping[str, str | Path]
                          ) -> tuple[PlanBudget, ...]:
    """``budgets`` with the delays of the named ones read from ``LatencyModel`` JSON files
    (``edgerl bench planner --write-latency-model FILE``): ``{"slow": "slow.json"}``."""
    names = {b.name for b in budgets}
    unknown = sorted(set(files) - names)
    if unknown:
        raise ValueError(f"no budget named {', '.join(unknown)}; budgets: {', '.join(names)}")
    out = []
    for b in budgets:
        if b.name in files:
            data: Any = json.loads(Path(files[b.name]).read_text())
            b = b.with_latency(from_dict(LatencyModel, data, "latency"))
        out.append(b)
    return tuple(out)


class BudgetPlanner:
    """The task's expert chunk, degraded per budget, padded to a common horizon.

    Args:
        env: The task or any wrapper around it (must have ``expert_chunk(h, env_ids)``).
        budgets: The budget set.
        generator: CPU generator for the plan noise.

    Attributes:
        horizon: Rows of every returned chunk: the largest budget horizon (shorter plans
            hold their last row, as the scheduler does past a chunk's end).
    """

    def __init__(self, env: Any, budgets: Sequence[PlanBudget],
                 generator: torch.Generator) -> None:
        self.task = getattr(env, "unwrapped", env)
        if not hasattr(self.task, "expert_chunk"):
            raise TypeError(f"{type(self.task).__name__} has no expert_chunk(horizon, env_ids)")
        self.budgets = tuple(budgets)
        if any(b.compensate for b in self.budgets) and (
                "prefix" not in inspect.signature(self.task.expert_chunk).parameters):
            raise TypeError(f"{type(self.task).__name__}.expert_chunk takes no prefix: it "
                            f"cannot serve a compensate budget")
        self.horizon = max((b.horizon for b in self.budgets if not b.keep), default=1)
        self.generator = generator

    def plan(self, budget: PlanBudget, env_ids: torch.Tensor,
             prefix: torch.Tensor | None = None) -> torch.Tensor:
        """Chunks (n, H, A) of ``budget`` for ``env_ids``; ``prefix`` (n, D, A), NaN-padded:
        the committed rows a ``compensate`` budget plans from (ignored by the others)."""
        if budget.compensate and prefix is not None:
            rows = self.task.expert_chunk(budget.horizon, env_ids, prefix=prefix)
        else:
            rows = self.task.expert_chunk(budget.horizon, env_ids)
        if budget.hold > 1:
            rows = rows[:, ::budget.hold].repeat_interleave(budget.hold, dim=1)
            rows = rows[:, :budget.horizon]
        if budget.gain != 1.0:
            rows = rows * budget.gain
        if budget.noise_std > 0:
            noise = torch.randn(rows.shape, generator=self.generator, dtype=rows.dtype)
            rows = rows + budget.noise_std * noise.to(rows.device)
        pad = self.horizon - budget.horizon
        if pad > 0:
            rows = torch.cat((rows, rows[:, -1:].expand(-1, pad, -1)), dim=1)
        return rows
