"""The gated scenario's host-side planner in the HIL: the plant's privileged expert, degraded
per budget exactly as the sim's :class:`~edgerl.sim.gate.budgets.BudgetPlanner` does in
training (``edgerl gate train``), served as the runtime's
:class:`~edgerl.runtime.gate.client.BudgetedPlanner`.

The HIL plant lives in the harness process, so the expert reads its true state (at the time
of the call, a few ms after the observation's stamp: the gated client decides on fresh
observations). The harness steps the plant under :attr:`ExpertBudgetPlanner.lock`; a plan
pickles the plant under it (14 KB, ~7 ms) and the expert runs on that copy in a planner
process, so a long plan (~90 ms for the 48-row slow budget on the loaded 2-core machine, ~150
ms for ``calm_kicks``' 96 rows: a Python loop over small torch ops) neither holds up the
plant's real-time steps nor takes the GIL from the host's control loop and serial reader. By
default each budget has its own process and the gate decides while plans compute
(:class:`ExpertBudgetPlanner`).
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from concurrent.futures import Future
from typing import Any

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.gate_obs import GateBudgetSpec, GateSpec
from edgerl.runtime.gate.client import chain

__all__ = ["BUDGET_WORKERS", "ExpertBudgetPlanner", "bundle_task_kwargs",
           "expert_budget_planner", "gate_summary", "plan_cost"]


#: How the host's budgeted planner computes plans (``HilConfig.budget_workers``).
BUDGET_WORKERS = ("per-budget", "shared")


class ExpertBudgetPlanner:
    """``plan(budget, observation, now, prefix)`` on the plant's expert for env 0, computed in
    planner processes (``spawn``, torch on one thread).

    Two layouts (``workers``):

    * ``per-budget`` (default): one process per non-keep budget, as a robot runs its fast and
      its slow model side by side. ``plan`` returns a future at once, so the gate keeps
      deciding while a plan computes (a kick during a 150 ms slow plan can still be answered
      by a fast one), as in training, where a plan in flight never blocks a decision. Plans of
      one budget queue behind each other in its process.
    * ``shared``: one process for all budgets, and ``plan`` waits for the plan (the first mode):
      the next decision starts after it, so a slow plan thins the decisions out instead of
      queueing plans that would all arrive late.

    Args:
        plant: The HIL plant (a task with ``expert_chunk``; one env).
        gate: The bundle's gate section (its budgets). low / high: Action limits (rows are
            clipped to them, as the plant clips commands). dt: Row spacing (s).
        seed: Seed of the plan noise (each worker's generator; per-budget workers add their
            budget's index). workers: One of :data:`BUDGET_WORKERS`.

    Attributes:
        calls: Plans asked per budget name. lock: Held while the plant steps.
    """

    def __init__(self, plant: Any, gate: GateSpec, low: list[float], high: list[float],
                 dt: float, seed: int = 0, workers: str = "per-budget") -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        from edgerl.sim.gate.env import plan_budgets

        if workers not in BUDGET_WORKERS:
            raise ValueError(f"budget workers {workers!r}: expected one of "
                             f"{', '.join(BUDGET_WORKERS)}")
        budgets = plan_budgets(gate)
        self.plant = getattr(plant, "unwrapped", plant)
        if not hasattr(self.plant, "expert_chunk"):
            raise TypeError(f"{type(self.plant).__name__} has no expert_chunk: a gate bundle "
                            "needs a plant with a privileged expert")
        self.low = np.asarray(low, np.float32)
        self.high = np.asarray(high, np.float32)
        self.dt = float(dt)
        self.workers = workers
        self.lock = threading.Lock()
        self.calls = {b.name: 0 for b in budgets}
        ctx = multiprocessing.get_context("spawn")
        names = [b.name for b in budgets if not b.keep] if workers == "per-budget" else ["*"]
        self._pools = {name: ProcessPoolExecutor(1, mp_context=ctx, initializer=_worker_init,
                                                 initargs=(budgets, seed + i, os.getpid()))
                       for i, name in enumerate(names)}
        with self.lock:
            snapshot = pickle.dumps(self.plant)
        ready = [pool.submit(_worker_ready, snapshot) for pool in self._pools.values()]
        for f in ready:  # started and warm (in parallel) before the episodes
            f.result(timeout=300)

    def plan(self, budget: GateBudgetSpec, observation: np.ndarray, now: float,
             prefix: np.ndarray | Future[np.ndarray] | None
             ) -> ActionChunk | Future[ActionChunk]:
        """The plant as it is now (pickled under the lock), planned in a planner process: a
        future of the chunk (``per-budget``) or the chunk, after waiting for it (``shared``).
        A ``prefix`` future (a plan in flight still computing) starts the plan once it
        resolves, from the plant as it was at this call."""
        with self.lock:
            snapshot = pickle.dumps(self.plant)
        self.calls[budget.name] += 1
        pool = self._pools.get(budget.name) or self._pools["*"]

        def start(rows: np.ndarray | None) -> Future[ActionChunk]:
            planned = pool.submit(_worker_plan, snapshot, budget.name, rows)
            return chain(planned, lambda r: self._chunk(r, now, budget))

        out = chain(prefix, start)
        return out.result() if self.workers == "shared" else out

    def _chunk(self, rows: np.ndarray, now: float, budget: GateBudgetSpec) -> ActionChunk:
        actions = np.clip(rows, self.low, self.high).astype(np.float32)
        return ActionChunk(actions=actions, t0=now, dt=self.dt, obs_time=now,
                           source=f"expert:{budget.name}")

    def close(self) -> None:
        """Stop the planner processes."""
        for pool in self._pools.values():
            pool.shutdown(wait=True, cancel_futures=True)


_WORKER: dict[str, Any] = {}


def _worker_init(budgets: tuple, seed: int, parent: int) -> None:
    import torch

    _exit_with_parent(parent)

    torch.set_num_threads(1)
    _WORKER["budgets"] = {b.name: b for b in budgets}
    _WORKER["generator"] = torch.Generator().manual_seed(int(seed))


def _exit_with_parent(parent: int, poll_s: float = 0.5) -> None:
    """Exit this planner process once ``parent`` is gone (the harness killed, even by
    SIGKILL, so ``close()`` never ran): a daemon thread polls the parent pid."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(0)

    threading.Thread(target=watch, name="edgerl-parent-watch", daemon=True).start()


def _worker_ready(snapshot: bytes) -> bool:
    """Import what a plan needs before the first one: the planner and, by unpickling a
    snapshot of the plant, its task's modules (seconds of imports that would otherwise delay
    the first plan of an episode past its budget's latency)."""
    from edgerl.sim.gate.budgets import BudgetPlanner  # noqa: F401  (import before use)

    pickle.loads(snapshot)
    return True


def _worker_plan(snapshot: bytes, name: str, prefix: np.ndarray | None) -> np.ndarray:
    """(horizon, A): budget ``name``'s plan from the pickled plant (the sim's
    ``BudgetPlanner``: expert chunk, hold, noise, committed prefix)."""
    import torch

    from edgerl.sim.gate.budgets import BudgetPlanner

    budgets = _WORKER["budgets"]
    planner = BudgetPlanner(pickle.loads(snapshot), tuple(budgets.values()),
                            _WORKER["generator"])
    pre = None if prefix is None else torch.from_numpy(np.asarray(prefix, np.float32))[None]
    rows = planner.plan(budgets[name], torch.zeros(1, dtype=torch.int64), pre)
    return rows[0, :budgets[name].horizon].cpu().numpy()


def bundle_task_kwargs(bundle: Any) -> dict[str, Any]:
    """The task arguments a bundle's plant needs (``extra.task_kwargs``: the road a gate was
    trained on), ``{}`` without a bundle or without them."""
    if bundle is None:
        return {}
    from edgerl.contract.spec import load_bundle_manifest

    extra = load_bundle_manifest(bundle, verify=False).extra
    kwargs = extra.get("task_kwargs") if isinstance(extra, dict) else None
    return dict(kwargs) if isinstance(kwargs, dict) else {}


def expert_budget_planner(bundle: Any, plant: Any, seed: int, fast_loop: bool = False,
                          policy: str = "gate", workers: str = "per-budget"
                          ) -> ExpertBudgetPlanner | None:
    """The host-side budgeted planner for a host-loop bundle with a gate (None without one;
    ``ValueError`` when a baseline ``policy`` is asked for without one)."""
    from edgerl.contract.spec import load_bundle_manifest

    spec = None if bundle is None else load_bundle_manifest(bundle, verify=False)
    if fast_loop or spec is None or spec.gate is None:
        if policy != "gate":
            raise ValueError(f"gate policy {policy!r} needs a host-loop bundle with a gate "
                             "(`edgerl gate export`)")
        return None
    return ExpertBudgetPlanner(plant, spec.gate, spec.action.low, spec.action.high,
                               spec.chunk.dt_s, seed, workers)


def plan_cost(client: Any) -> float | None:
    """The planning price paid so far: the sum over budgets of requests x the budget's
    ``cost`` (the reward price training charged per plan); None without a gated client."""
    stats = getattr(client, "stats", None)
    gate = getattr(client, "gate", None)
    if stats is None or gate is None:
        return None
    requests = stats()["requests"]
    return float(sum(b.cost * requests.get(b.name, 0) for b in gate.budgets))


def gate_summary(client: Any, experts: ExpertBudgetPlanner | None, policy: str,
                 noise_std: float, returns: list[float] | None = None,
                 costs_at_ends: list[float | None] | None = None) -> dict[str, Any]:
    """The gated client's counts (decisions and requests per budget, deliveries), the plans
    the host expert computed, and the planning price paid: ``plan_cost`` (see
    :func:`plan_cost`) and ``return_minus_cost_mean`` (the mean episode return minus
    ``plan_cost`` per episode: the sim's gate return); with ``costs_at_ends`` (the
    :func:`plan_cost` at each episode's end) also ``episode_plan_costs`` (each episode's
    share, by when its plans were asked). Empty without a gate."""
    if experts is None or client is None:
        return {}
    stats = client.stats()
    cost = plan_cost(client) or 0.0
    out = {"gate_policy": policy, "budget_workers": experts.workers,
           "gate_decided": stats["decided"],
           "gate_requests": stats["requests"], "expert_plans": dict(experts.calls),
           "chunks_delivered": stats["delivered"], "chunks_late": stats["late"],
           "chunks_dropped_reset": stats["dropped_reset"],
           "gate_errors": stats["errors"], "prefix_in_flight": stats["prefix_in_flight"],
           "prefix_waited": stats["prefix_waited"], "action_noise_std": noise_std,
           "plan_cost": round(float(cost), 4)}
    if returns:
        out["return_minus_cost_mean"] = float(np.mean(returns)) - cost / len(returns)
    if costs_at_ends and None not in costs_at_ends:
        out["episode_plan_costs"] = np.diff([0.0, *costs_at_ends]).round(4).tolist()
    return out
