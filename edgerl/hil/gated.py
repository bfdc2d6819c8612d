"""The gated scenario's host-side planner in the HIL: the plant's privileged expert, degraded
per budget exactly as the sim's :class:`~edgerl.sim.wrappers.budgets.BudgetPlanner` does in
training (``edgerl gate train``), served as the runtime's
:class:`~edgerl.runtime.planners.gated.BudgetedPlanner`.

The HIL plant lives in the harness process, so the expert reads its true state (at the time
of the call, a few ms after the observation's stamp: the gated client decides on fresh
observations). The harness steps the plant under :attr:`ExpertBudgetPlanner.lock`; the
expert copies the plant under it (~2 ms) and plans on the copy outside it, so a long plan
(~90 ms for the 48-row slow budget on the loaded 2-core machine) never holds up the plant's
real-time steps.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

import numpy as np

from edgerl.chunk import ActionChunk
from edgerl.gate_obs import GateBudgetSpec, GateSpec

__all__ = ["ExpertBudgetPlanner", "bundle_task_kwargs", "expert_budget_planner", "gate_summary"]


class ExpertBudgetPlanner:
    """``plan(budget, observation, now, prefix)`` on the plant's expert for env 0.

    Args:
        plant: The HIL plant (a task with ``expert_chunk``; one env).
        gate: The bundle's gate section (its budgets). low / high: Action limits (rows are
            clipped to them, as the plant clips commands). dt: Row spacing (s).
        seed: Seed of the plan noise.

    Attributes:
        calls: Plans computed per budget name. lock: Held while the plant steps.
    """

    def __init__(self, plant: Any, gate: GateSpec, low: list[float], high: list[float],
                 dt: float, seed: int = 0) -> None:
        import torch

        from edgerl.sim.wrappers.budgets import BudgetPlanner
        from edgerl.sim.wrappers.gate import plan_budgets

        budgets = plan_budgets(gate)
        self._by_name = {b.name: b for b in budgets}
        self.plant = getattr(plant, "unwrapped", plant)
        self.inner = BudgetPlanner(plant, budgets, torch.Generator().manual_seed(int(seed)))
        self.low = np.asarray(low, np.float32)
        self.high = np.asarray(high, np.float32)
        self.dt = float(dt)
        self.lock = threading.Lock()
        self.calls = {b.name: 0 for b in budgets}

    def plan(self, budget: GateBudgetSpec, observation: np.ndarray, now: float,
             prefix: np.ndarray | None) -> ActionChunk:
        import torch

        b = self._by_name[budget.name]
        pre = None if prefix is None else torch.from_numpy(np.asarray(prefix, np.float32))[None]
        with self.lock:
            self.inner.task = copy.deepcopy(self.plant)
        rows = self.inner.plan(b, torch.zeros(1, dtype=torch.int64), pre)
        self.calls[budget.name] += 1
        actions = np.clip(rows[0, :budget.horizon].cpu().numpy(), self.low, self.high)
        return ActionChunk(actions=actions.astype(np.float32), t0=now, dt=self.dt,
                           obs_time=now, source=f"expert:{budget.name}")


def bundle_task_kwargs(bundle: Any) -> dict[str, Any]:
    """The task arguments a bundle's plant needs (``extra.task_kwargs``: the road a gate was
    trained on), ``{}`` without a bundle or without them."""
    if bundle is None:
        return {}
    from edgerl.spec import load_bundle_manifest

    extra = load_bundle_manifest(bundle, verify=False).extra
    kwargs = extra.get("task_kwargs") if isinstance(extra, dict) else None
    return dict(kwargs) if isinstance(kwargs, dict) else {}


def expert_budget_planner(bundle: Any, plant: Any, seed: int) -> ExpertBudgetPlanner | None:
    """The host-side budgeted planner for a bundle with a gate (None without one)."""
    if bundle is None:
        return None
    from edgerl.spec import load_bundle_manifest

    spec = load_bundle_manifest(bundle, verify=False)
    if spec.gate is None:
        return None
    return ExpertBudgetPlanner(plant, spec.gate, spec.action.low, spec.action.high,
                               spec.chunk.dt_s, seed)


def gate_summary(client: Any, experts: ExpertBudgetPlanner | None, policy: str,
                 noise_std: float) -> dict[str, Any]:
    """The gated client's counts (decisions and requests per budget, deliveries) and the
    plans the host expert computed; empty without a gate."""
    if experts is None or client is None:
        return {}
    stats = client.stats()
    return {"gate_policy": policy, "gate_decided": stats["decided"],
            "gate_requests": stats["requests"], "plans_computed": dict(experts.calls),
            "chunks_delivered": stats["delivered"], "chunks_late": stats["late"],
            "gate_errors": stats["errors"], "action_noise_std": noise_std}
