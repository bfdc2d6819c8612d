"""Planning budgets: validation, measured latencies, and the degraded expert plans."""

from __future__ import annotations

import pytest
import torch

from edgerl.contract.spec import LatencyModel
from edgerl.runtime.planners.latency_model import save_latency_model
from edgerl.sim.gate.budgets import (
    KEEP,
    BudgetPlanner,
    PlanBudget,
    default_budgets,
    load_budget_latencies,
)


class RampTask:
    """``expert_chunk`` row i = 10 * env id + i (one action)."""

    def expert_chunk(self, horizon, env_ids):
        rows = torch.arange(horizon, dtype=torch.float32)
        return (10.0 * env_ids.float()[:, None] + rows[None, :])[..., None]


def test_budget_validation_and_latency():
    assert KEEP.keep and KEEP.cost == 0.0
    with pytest.raises(ValueError, match="horizon"):
        PlanBudget("x", delay=1)
    with pytest.raises(ValueError, match="delay"):
        PlanBudget("x", delay=-1, horizon=4)
    with pytest.raises(ValueError, match="hold"):
        PlanBudget("x", horizon=4, hold=0)
    b = PlanBudget("slow", delay=5, horizon=8)
    assert b.latency == LatencyModel(planner_delay_steps=5)
    measured = LatencyModel(planner_delay_steps=2, planner_period_steps=4,
                            delay_distribution=[0.0, 0.5, 0.5])
    m = b.with_latency(measured).latency
    assert m.delay_distribution == [0.0, 0.5, 0.5] and m.planner_period_steps == 1
    names = [x.name for x in default_budgets()]
    assert names == ["keep", "fast", "slow"]


def test_loading_a_measured_latency_model_sets_the_delays(tmp_path):
    path = save_latency_model(LatencyModel(planner_delay_steps=3,
                                           delay_distribution=[0.0, 0.25, 0.25, 0.5]),
                              tmp_path / "slow.json")
    budgets = load_budget_latencies(default_budgets(fast_delay=1, slow_delay=9),
                                    {"slow": str(path)})
    slow = budgets[2]
    assert slow.latency.planner_delay_steps == 3
    assert slow.latency.delay_distribution == [0.0, 0.25, 0.25, 0.5]
    assert budgets[1].latency.planner_delay_steps == 1  # untouched
    with pytest.raises(ValueError, match="no budget named nope"):
        load_budget_latencies(budgets, {"nope": str(path)})


def test_budget_planner_degrades_and_pads():
    budgets = (KEEP, PlanBudget("coarse", horizon=6, hold=3), PlanBudget("long", horizon=10),
               PlanBudget("noisy", horizon=10, noise_std=0.5))
    planner = BudgetPlanner(RampTask(), budgets, torch.Generator().manual_seed(0))
    assert planner.horizon == 10
    ids = torch.tensor([0, 2])
    coarse = planner.plan(budgets[1], ids)
    assert coarse.shape == (2, 10, 1)
    assert coarse[1, :, 0].tolist() == [20, 20, 20, 23, 23, 23, 23, 23, 23, 23]
    assert planner.plan(budgets[2], ids)[0, :, 0].tolist() == list(range(10))
    noisy = planner.plan(budgets[3], ids)
    assert 0.1 < float((noisy - planner.plan(budgets[2], ids)).std()) < 1.0
    with pytest.raises(TypeError, match="expert_chunk"):
        BudgetPlanner(object(), budgets, torch.Generator())
    with pytest.raises(TypeError, match="takes no prefix"):
        BudgetPlanner(RampTask(), (PlanBudget("c", horizon=2, compensate=True),),
                      torch.Generator())


def test_budget_gain_shrinks_the_plan():
    budgets = (PlanBudget("exact", horizon=5), PlanBudget("small", horizon=5, gain=0.5))
    planner = BudgetPlanner(RampTask(), budgets, torch.Generator().manual_seed(0))
    ids = torch.tensor([1])
    assert torch.equal(planner.plan(budgets[1], ids), 0.5 * planner.plan(budgets[0], ids))
    with pytest.raises(ValueError, match="gain in"):
        PlanBudget("bad", horizon=2, gain=1.5)
