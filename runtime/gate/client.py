"""``GatedPlannerClient``: the planner client that asks what the gate chooses, when it chooses.

Every ``decision_steps`` new observations (control steps) the client takes the newest one, lets the
:class:`~edgerl.runtime.gate.budget_gate.BudgetGate` (or a baseline chooser) pick a budget and
honours it:

* a ``keep`` budget sends no request (the current chunk keeps running);
* any other budget asks the :class:`BudgetedPlanner` for that budget's plan, from the
  observation's stamp ``t_obs``; the chunk (``t0 = obs_time = t_obs``, the budget's rows) is
  pushed into the :class:`~edgerl.runtime.chunk_buffer.ChunkBuffer` at ``t_obs + D * dt``,
  ``D`` drawn from the budget's latency model: the contract's arrival rule (a plan queried at
  step t with delay D is adopted at t + D and runs from its row D, since rows are
  time-aligned). A planner slower than that delivers when it returns (late).
  A ``compensate`` budget gets the committed prefix: the rows the robot executes over the
  next ``D`` steps: the current chunk's, replaced from its due step by a plan in flight that
  arrives within them, zeros where stale or absent, as the sim's ``GatedEnv.committed_rows``
  does. While such a plan is still computing its rows are not known yet: the prefix is then
  a future, resolved (from the running chunk and the plans pending at the request) once they
  are, and the planner starts from it then (:func:`chain`); no decision waits for it.

Requests in flight are tracked (the gate's ``in_flight`` input); a newer plan replaces an
older one at arrival, an older one arriving later is dropped by the buffer (``is_newer``).
Counters: decisions and requests per budget, chunks delivered, late deliveries, errors,
requests dropped at an episode reset (planned from the old episode).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.clock import Clock, MonotonicClock
from edgerl.contract.gate_obs import GateBudgetSpec
from edgerl.contract.planner import PlannerHealth
from edgerl.contract.timing_rules import LatencyModel, chunk_row, chunk_usable
from edgerl.runtime.chunk_buffer import ChunkBuffer
from edgerl.runtime.gate.budget_gate import BudgetChooser, plan_state, steps_between
from edgerl.runtime.loop_io import ObservationSlot
from edgerl.runtime.metrics import LoopMetrics
from edgerl.runtime.planners.client.worker import WorkerThread

__all__ = ["BudgetedPlanner", "GatedPlannerClient", "chain", "committed_prefix",
           "draw_delay_steps", "when_all"]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class BudgetedPlanner(Protocol):
    """A planner with discrete budgets.

    ``plan(budget, observation (O,), now, prefix)`` returns the budget's chunk: ``budget.horizon``
    rows, ``t0 = obs_time = now``; ``prefix`` ``(D, A)`` (``compensate`` budgets only, else
    ``None``) holds the rows the robot executes while the plan is computed, or is a
    ``Future`` of them while a plan in flight that arrives within them is still computing:
    the planner reads whatever else it needs now and starts once the prefix resolves
    (:func:`chain`), never blocking in ``plan``. A planner that computes elsewhere (a process,
    a server) returns a ``concurrent.futures.Future`` of the chunk at once, so the client's
    next decision and due deliveries never wait for it.
    """

    def plan(self, budget: GateBudgetSpec, observation: np.ndarray, now: float,
             prefix: np.ndarray | Future[np.ndarray] | None
             ) -> ActionChunk | Future[ActionChunk]: ...


def _resolved(value: T) -> Future[T]:
    done: Future[T] = Future()
    done.set_result(value)
    return done


def chain(source: T | Future[T], then: Callable[[T], R | Future[R]]) -> Future[R]:
    """A future of ``then(value)``, where ``value`` is ``source`` or its result: ``then``
    runs once ``source`` resolves (in the thread that resolves it; at once when it is a
    value or done) and may itself return a future, which the result follows. ``source``'s
    exception or cancellation, or ``then``'s exception, fails the result. No thread waits."""
    out: Future[R] = Future()

    def follow(inner: Future[R]) -> None:
        try:
            out.set_result(inner.result())
        except BaseException as exc:  # the inner plan's failure is the result's
            out.set_exception(exc)

    def start(done: Future[T]) -> None:
        try:
            result = then(done.result())
        except BaseException as exc:
            out.set_exception(exc)
            return
        if isinstance(result, Future):
            result.add_done_callback(follow)
        else:
            out.set_result(result)

    (source if isinstance(source, Future) else _resolved(source)).add_done_callback(start)
    return out


def when_all(futures: Sequence[Future]) -> Future[None]:
    """A future resolved (with None) once every one of ``futures`` is done, whatever their
    outcome (at once when they all are). No thread waits."""
    out: Future[None] = Future()
    left = [len(futures)]
    count = threading.Lock()

    def one_done(_: Future) -> None:
        with count:
            left[0] -= 1
            last = left[0] == 0
        if last:
            out.set_result(None)

    if not futures:
        out.set_result(None)
    for f in futures:
        f.add_done_callback(one_done)
    return out


def draw_delay_steps(latency: LatencyModel, rng: np.random.Generator) -> int:
    """One delay in whole control steps: ``delay_distribution`` (probabilities over 0, 1,
    2...) or ``planner_delay_steps``, plus ``U(-j, j)`` jitter rounded up, never below 0 (the
    rule of the sim's ``sample_delays``)."""
    if latency.delay_distribution:
        p = np.asarray(latency.delay_distribution, np.float64)
        base = int(rng.choice(p.size, p=p / p.sum()))
    else:
        base = int(latency.planner_delay_steps)
    j = float(latency.delay_jitter_steps)
    if j > 0:
        return int(math.ceil(max(base + rng.uniform(-j, j), 0.0) - 1e-9))
    return base


def committed_prefix(chunk: ActionChunk | None, t: float, steps: int, dt: float,
                     stale_steps: int, action_dim: int,
                     arriving: Sequence[tuple[float, ActionChunk]] = ()) -> np.ndarray:
    """(steps, A) float32: the rows the robot executes at ``t, t + dt, ...``: at each step the
    newest plan (latest ``obs_time``) among ``chunk`` (running now) and the ``arriving`` ones
    ``(due, chunk)`` due by then, zeros where that plan is stale or there is none: the sim's
    ``GatedEnv.committed_rows`` (plans in flight that arrive within the delay count)."""
    out = np.zeros((steps, action_dim), np.float32)
    plans = ([(-math.inf, chunk)] if chunk is not None else []) + list(arriving)
    for j in range(steps):
        tj = t + j * dt
        due = [c for d, c in plans if d <= tj + 1e-9]
        if not due:
            continue
        best = max(due, key=lambda c: c.obs_time)
        off = steps_between(tj, best.t0, dt)
        if chunk_usable(np.int64(off), best.horizon, stale_steps):
            out[j] = best.actions[chunk_row(np.int64(off), best.horizon)]
    return out


@dataclass(order=True)
class _Pending:
    due: float
    serial: int
    plan: Future[ActionChunk] = field(compare=False)
    budget: GateBudgetSpec = field(compare=False)
    t_obs: float = field(compare=False)


class GatedPlannerClient:
    """Decides a budget every ``decision_steps`` steps and runs the budgeted planner.

    Args:
        gate: The bundle's ``BudgetGate`` (or a baseline ``BudgetChooser``).
        planner: The :class:`BudgetedPlanner`.
        buffer: Where chunks go (its ``action_dim`` set). obs: The loop's observation slot.
        clock: Time source (the observation stamps' clock).
        metrics: Optional loop metrics; each delivery's observation -> push time is appended.
        seed: Seed of the delay draws.
    """

    def __init__(self, gate: BudgetChooser, planner: BudgetedPlanner, buffer: ChunkBuffer,
                 obs: ObservationSlot, *, clock: Clock | None = None,
                 metrics: LoopMetrics | None = None, seed: int = 0) -> None:
        if buffer.action_dim is None:
            raise ValueError("the gated client needs a ChunkBuffer with its action_dim set")
        self.gate, self.planner, self.buffer, self.obs = gate, planner, buffer, obs
        self.action_dim = int(buffer.action_dim)
        self.clock: Clock = clock or MonotonicClock()
        self.metrics = metrics
        self.dt = gate.dt
        self.period_s = gate.gate.decision_steps * self.dt
        self.rng = np.random.default_rng(seed)
        self._obs = np.zeros(obs.dim, np.float32)
        self._pending: list[_Pending] = []
        self._serial = 0
        self._lock = threading.Lock()
        self._worker = WorkerThread("edgerl-gated-client", self._main)
        self._stop, self._wake = self._worker.stopping, self._worker.wake
        self.requests = {b.name: 0 for b in gate.budgets}
        self.counters = {k: 0 for k in ("decisions", "delivered", "late", "errors",
                                        "dropped_reset", "prefix_in_flight", "prefix_waited")}
        self.last_latency_s = float("nan")
        self._health = PlannerHealth.STARTING

    # --- one decision ----------------------------------------------------------------------
    def in_flight(self, now: float) -> bool:
        """A requested plan has not been delivered by ``now`` (not due, or not computed)."""
        with self._lock:
            return any(p.due > now or not p.plan.done() for p in self._pending)

    def read_observation(self) -> tuple[np.ndarray, float] | None:
        """The newest finite observation ``(O,)`` and its stamp, or None (also while the
        newest one predates the buffer's episode reset: a plan from it would be refused)."""
        t_obs, seq = self.obs.read_into(self._obs)
        if seq == 0 or not math.isfinite(t_obs) or not np.isfinite(self._obs).all():
            return None
        if t_obs < self.buffer.reset_t:
            return None
        return self._obs.copy(), t_obs

    def gate_observation(self, robot: np.ndarray, t_obs: float, now: float) -> np.ndarray:
        """What the gate sees at ``now`` for the observation stamped ``t_obs``."""
        plan = plan_state(self.buffer.latest(), t_obs, self.dt)
        return self.gate.observe(robot, plan, self.in_flight(now))

    def step(self, now: float | None = None) -> int | None:
        """Deliver due chunks, decide once and act on it; the chosen index, or None without
        an observation."""
        now = self.clock.now() if now is None else now
        self.deliver(now)
        got = self.read_observation()
        if got is None:
            return None
        robot, t_obs = got
        plan = plan_state(self.buffer.latest(), t_obs, self.dt)
        j = self.gate.decide(robot, plan, self.in_flight(now))
        self.counters["decisions"] += 1
        self.execute(j, robot, t_obs)
        self.deliver(now)  # a zero-delay plan arrives at once
        return j

    def execute(self, index: int, robot: np.ndarray, t_obs: float) -> None:
        """Honour budget ``index`` for the observation stamped ``t_obs``: nothing for keep,
        else request the plan and schedule its arrival."""
        budget = self.gate.budgets[index]
        if budget.keep:
            return
        delay = draw_delay_steps(budget.latency, self.rng)
        prefix = self._prefix(t_obs, delay) if budget.compensate else None
        self.requests[budget.name] += 1
        try:
            result = self.planner.plan(budget, robot, t_obs, prefix)
            plan = result if isinstance(result, Future) else _resolved(result)
        except Exception as exc:  # reported when it is due, as a failed future is
            plan = Future()
            plan.set_exception(exc)
        with self._lock:
            self._serial += 1
            self._pending.append(_Pending(t_obs + delay * self.dt, self._serial, plan, budget,
                                          t_obs))
            self._pending.sort()

    def _prefix(self, t_obs: float, delay: int) -> np.ndarray | Future[np.ndarray]:
        """The committed prefix ``(delay, A)`` of a request at ``t_obs``: the running chunk
        and the plans pending now that are due within the delay. When one of those is still
        computing, a future resolved once all are done (counted ``prefix_waited``); plans
        requested later do not count (the sim's rule: what is known at the request)."""
        running = self.buffer.latest()
        until = t_obs + delay * self.dt
        with self._lock:
            pending = [p for p in self._pending if p.due < until]

        def rows(_: object = None) -> np.ndarray:
            arriving = [(p.due, p.plan.result()) for p in pending
                        if not p.plan.cancelled() and p.plan.exception() is None]
            self.counters["prefix_in_flight"] += len(arriving)
            return committed_prefix(running, t_obs, delay, self.dt, self.gate.gate.stale_steps,
                                    self.action_dim, arriving)

        computing = [p.plan for p in pending if not p.plan.done()]
        if not computing:
            return rows()
        self.counters["prefix_waited"] += 1
        return chain(when_all(computing), rows)

    def deliver(self, now: float) -> int:
        """Push every chunk due by ``now`` and computed (oldest due first; a plan still being
        computed holds the ones due after it); returns how many."""
        n = 0
        while True:
            with self._lock:
                head = self._pending[0] if self._pending else None
                if head is None or head.due > now + 1e-9 or not head.plan.done():
                    return n
                self._pending.pop(0)
            try:
                chunk = self._checked(head)
            except Exception as exc:
                self.counters["errors"] += 1
                log.warning("gated planner: budget %s: %s: %s", head.budget.name,
                            type(exc).__name__, exc)
                continue
            if now - head.due > self.dt:
                self.counters["late"] += 1
            self.buffer.push(chunk, now=now)
            self.counters["delivered"] += 1
            self.last_latency_s = now - chunk.obs_time
            if self.metrics is not None:
                self.metrics.planner_latency_s.append(self.last_latency_s)
            self._health = PlannerHealth.OK
            n += 1

    @staticmethod
    def _checked(p: _Pending) -> ActionChunk:
        """The computed chunk of ``p``; the planner's exception, or ``ValueError`` when it
        is not the budget's rows from the observation's stamp."""
        chunk = p.plan.result()
        if chunk.horizon != p.budget.horizon or chunk.t0 != p.t_obs:
            raise ValueError(f"budget {p.budget.name!r}: the planner returned {chunk.horizon} "
                             f"rows from t0 {chunk.t0:.6f}; expected {p.budget.horizon} rows "
                             f"from the observation's stamp {p.t_obs:.6f}")
        return chunk

    def next_due(self) -> float:
        """When the next pending chunk is due (inf when none; soon while a due one is still
        being computed)."""
        with self._lock:
            if not self._pending:
                return math.inf
            head = self._pending[0]
            return head.due if head.plan.done() else max(head.due, self.clock.now() + 1e-3)

    # --- lifecycle (the PlannerClient's interface) ----------------------------------------
    def start(self) -> None:
        """Start the decision thread."""
        self._worker.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the decision thread (plans still pending are not delivered)."""
        self._worker.stop(timeout)

    def replan_now(self) -> None:
        """A new episode (or an urgent decision): forget requests planned before the buffer's
        reset and decide at once."""
        with self._lock:
            kept = [p for p in self._pending if p.t_obs >= self.buffer.reset_t]
            self.counters["dropped_reset"] += len(self._pending) - len(kept)
            self._pending = kept
        self._wake.set()

    def health(self) -> PlannerHealth:
        return self._health

    def stats(self) -> dict[str, Any]:
        """Counters, decisions and requests per budget, health, last latency (s)."""
        return {**self.counters, "decided": dict(self.gate.counts),
                "requests": dict(self.requests), "health": self._health.value,
                "last_latency_s": self.last_latency_s}

    def _main(self) -> None:
        """Decide on every ``decision_steps``-th new observation (each decision sees a fresh
        state, as the sim's decisions do; the first new one after :meth:`replan_now`) and
        deliver due chunks in between."""
        steps = self.gate.gate.decision_steps
        seq, fresh = self.obs.seq, steps - 1
        while not self._stop.is_set():
            try:
                now = self.clock.now()
                self.deliver(now)
                if self._wake.is_set():
                    self._wake.clear()
                    fresh = max(fresh, steps - 1)
                timeout = max(0.0, min(self.next_due() - now, self.period_s))
                if not self.obs.wait_newer(seq, timeout):
                    continue
                seq = self.obs.seq
                fresh += 1
                if fresh >= steps and self.step(self.clock.now()) is not None:
                    fresh = 0
            except Exception as exc:  # the planner or the gate raised: skip this decision
                self.counters["errors"] += 1
                fresh = 0
                log.warning("gated planner: %s: %s", type(exc).__name__, exc)
