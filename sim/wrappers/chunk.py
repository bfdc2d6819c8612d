"""Batched planner/chunk timing: which chunk row every env executes at every control step.

Timing (control steps ``t`` count from each env's episode start; see docs/sim.md)::

    step k (query, (t - phase) % P == 0):  plan(obs seen at k) -> chunk, step0 = k,
                                            row i is meant for step k + i
    step k + D_k (arrival):                 the chunk replaces the current one if its
                                            step0 is newer; rows < t - step0 are dropped
    every step t:                           row index = t - step0 of the current chunk;
                                            past the last row the last row holds;
                                            has_chunk = 1 from the first arrival until
                                            t - step0 >= H + stale_steps
    before the first arrival:               has_chunk = 0

``D_k`` is drawn per env and per query (:func:`sample_delays`). Several queries may be in
flight when ``D > P`` (a pipelined planner server); a chunk that arrives after a newer one
(only possible with jitter) is discarded.

Asynchronous planners (a planner service): a ``PlanFn`` with a ``submit(obs, env_ids)``
method returning a future (``.result() -> (n, H, A)``) is queried with ``submit``, and the
simulation steps on while the request is in flight; the future is collected only when one of
its chunks is due (step ``k + D_k``). The chunks, their timing and therefore training are
exactly those of the synchronous call: only the wall-clock wait overlaps with simulation.
A planner whose ``coalesce`` attribute is true (a planner service, where every request costs
a round of wake-ups) has its queries held and sent together: a query of step ``k`` with delay
``D_k`` is sent by step ``k + D_k // 2`` at the latest, in one ``submit`` with every query
held then (its chunk still comes from the observation of step ``k`` and arrives at ``k + D_k``;
a chunk needed before its query was sent is sent at once).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from edgerl.contract.timing import (
    LatencyModel,
    chunk_usable,
    inflight_slots,
    is_newer,
    max_planner_delay,
    required_horizon,
)

__all__ = ["ChunkScheduler", "DelayFn", "PlanFn", "max_planner_delay", "required_horizon",
           "sample_delays"]

#: ``plan(obs (n, O), env_ids (n,)) -> chunks (n, H, A)``: the batched planner callable. A
#: planner that exports an intent vector (its ``intent_dim`` attribute > 0) returns the pair
#: ``(chunks (n, H, A), intent (n, I))`` instead.
PlanFn = Callable[[torch.Tensor, torch.Tensor], Any]
#: ``delays(env_ids (n,), t (n,)) -> int64 (n,)``: replaces the sampled planner delays (a
#: recorded arrival trace, for parity with the runtime).
DelayFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def sample_delays(latency: LatencyModel, n: int, generator: torch.Generator) -> torch.Tensor:
    """Planner delays in whole control steps, int64 (n,), on the CPU.

    ``delay_distribution`` (probabilities over 0, 1, 2...) replaces ``planner_delay_steps``
    when given. Jitter adds ``U(-j, j)`` steps; a delay that is not a whole number of steps
    makes the chunk available at the next control step (ceil), never earlier than 0.
    """
    if latency.delay_distribution:
        probs = torch.tensor(latency.delay_distribution, dtype=torch.float64)
        base = torch.multinomial(probs, n, replacement=True, generator=generator)
    else:
        base = torch.full((n,), int(latency.planner_delay_steps), dtype=torch.int64)
    if latency.delay_jitter_steps > 0:
        j = float(latency.delay_jitter_steps)
        u = torch.rand(n, generator=generator, dtype=torch.float64) * 2.0 * j - j
        cont = (base.to(torch.float64) + u).clamp_min(0.0)
        return torch.ceil(cont - 1e-9).to(torch.int64)
    return base


class ChunkScheduler:
    """Per-env chunk state machine: queries, in-flight chunks, adoption, row selection.

    Args:
        num_envs: N. horizon: H. action_dim: A.
        latency: Planner delay / period / jitter (``LatencyModel``).
        device: Torch device.
        generator: CPU generator for delays and phases.
        stale_steps: Steps past the last row after which ``has_chunk`` drops to 0.
        random_phase: Query phase per env uniform in ``[0, P)`` at each episode start
            (else 0: every env queries at t = 0, P, 2P...).
        extra_delay: Optional int64 (N,) added to every sampled delay of that env (domain
            randomization's ``latency_steps``); ``extra_max`` bounds it.
        intent_dim: Size I of the planner's intent vector (0: the planner has none).

    Attributes:
        delay_fn: Optional :data:`DelayFn` used instead of sampling (``extra_delay`` is
            still added).

    State after :meth:`tick` (all on ``device``):
        cur (N, H, A), cur_intent (N, I), cur_step0 (N,), cur_obs_step (N,),
        cur_valid (N,) bool,
        prev (N, H, A), prev_step0 (N,), prev_valid (N,) (the chunk replaced most recently),
        arrived_at (N,) step the current chunk arrived.
    """

    def __init__(self, num_envs: int, horizon: int, action_dim: int, latency: LatencyModel,
                 device: torch.device | str, generator: torch.Generator, stale_steps: int = 0,
                 random_phase: bool = False, extra_delay: torch.Tensor | None = None,
                 extra_max: int = 0, intent_dim: int = 0) -> None:
        if horizon < 1:
            raise ValueError(f"chunk horizon must be >= 1, got {horizon}")
        if stale_steps < 0:
            raise ValueError(f"stale_steps must be >= 0, got {stale_steps}")
        n, h, a = int(num_envs), int(horizon), int(action_dim)
        self.num_envs, self.horizon, self.action_dim = n, h, a
        self.intent_dim = i = int(intent_dim)
        self.latency = latency
        self.period = int(latency.planner_period_steps)
        self.max_delay = max_planner_delay(latency, extra_max)
        self.slots = inflight_slots(self.max_delay, self.period)
        self.stale_steps = int(stale_steps)
        self.random_phase = bool(random_phase)
        self.extra_delay = extra_delay
        self.device = torch.device(device)
        self.generator = generator
        dev = self.device
        m = self.slots
        self.t = torch.zeros(n, dtype=torch.int64, device=dev)
        self.phase = torch.zeros(n, dtype=torch.int64, device=dev)
        self.n_queries = torch.zeros(n, dtype=torch.int64, device=dev)
        self.fly = torch.zeros(n, m, h, a, device=dev)
        self.fly_intent = torch.zeros(n, m, i, device=dev)
        self.fly_step0 = torch.zeros(n, m, dtype=torch.int64, device=dev)
        self.fly_obs_step = torch.zeros(n, m, dtype=torch.int64, device=dev)
        self.fly_arrive = torch.zeros(n, m, dtype=torch.int64, device=dev)
        self.fly_valid = torch.zeros(n, m, dtype=torch.bool, device=dev)
        self.cur = torch.zeros(n, h, a, device=dev)
        self.cur_intent = torch.zeros(n, i, device=dev)
        self.cur_step0 = torch.zeros(n, dtype=torch.int64, device=dev)
        self.cur_obs_step = torch.zeros(n, dtype=torch.int64, device=dev)
        self.cur_valid = torch.zeros(n, dtype=torch.bool, device=dev)
        self.arrived_at = torch.zeros(n, dtype=torch.int64, device=dev)
        self.prev = torch.zeros(n, h, a, device=dev)
        self.prev_step0 = torch.zeros(n, dtype=torch.int64, device=dev)
        self.prev_valid = torch.zeros(n, dtype=torch.bool, device=dev)
        self.last_delay = torch.zeros(n, dtype=torch.int64, device=dev)
        self.delay_fn: DelayFn | None = None
        #: Query serial per in-flight slot: a pending answer fills its slot only if the slot
        #: still holds that query (an episode reset or a reused slot makes it obsolete).
        self.fly_serial = torch.zeros(n, m, dtype=torch.int64, device=dev)
        self._serial = 0
        #: Submitted, not yet collected: (future, env ids (n,), slots (n,), serial).
        self._pending: list[tuple[Any, torch.Tensor, torch.Tensor, int]] = []
        #: Control steps counted by :meth:`advance`; queries held for a coalescing planner,
        #: the step by which they must be sent, and the planner to send them to.
        self.steps = 0
        self._held: list[_Held] = []
        self._send_by: int | None = None
        self._held_plan: Any = None

    def reset(self, env_ids: torch.Tensor) -> None:
        """Start new episodes for ``env_ids``: t = 0, nothing in flight, no chunk."""
        if env_ids.numel() == 0:
            return
        self.t[env_ids] = 0
        self.n_queries[env_ids] = 0
        self.fly_valid[env_ids] = False
        self.fly_serial[env_ids] = 0  # their pending answers (if any) no longer fill a slot
        self.cur_valid[env_ids] = False
        self.prev_valid[env_ids] = False
        if self.random_phase and self.period > 1:
            ph = torch.randint(0, self.period, (int(env_ids.numel()),), generator=self.generator)
            self.phase[env_ids] = ph.to(self.device)

    def advance(self, not_done: torch.Tensor) -> None:
        """Count one control step for the envs that did not start a new episode."""
        self.t += not_done.to(torch.int64)
        self.steps += 1

    def due(self) -> torch.Tensor:
        """Bool (N,): envs whose planner is queried at their current step."""
        rel = self.t - self.phase
        return (rel >= 0) & (torch.remainder(rel, self.period) == 0)

    def tick(self, obs: torch.Tensor, plan: PlanFn, obs_delay: int = 0,
             only: torch.Tensor | None = None) -> torch.Tensor:
        """Query due planners on ``obs`` (N, O), then adopt chunks that arrive now.

        Args:
            obs: What the planner sees at each env's current step.
            plan: Batched planner; called once with only the due envs.
            obs_delay: Age (steps) of ``obs`` when seen: ``obs_step = t - obs_delay``.
            only: Optional bool (N,): query only these envs (others were ticked already).

        Returns:
            Bool (N,): envs that adopted a new chunk at this step.
        """
        due = self.due() if only is None else self.due() & only
        due_ids = due.nonzero().squeeze(-1)
        if due_ids.numel():
            self._query(obs, plan, due_ids, obs_delay)
        if self._send_by is not None and self.steps >= self._send_by:
            self._send_held()
        return self._adopt()

    def _query(self, obs: torch.Tensor, plan: PlanFn, ids: torch.Tensor, obs_delay: int) -> None:
        submit = getattr(plan, "submit", None)
        coalesce = submit is not None and bool(getattr(plan, "coalesce", False))
        if coalesce:
            answer: Any = None  # held below, once its delay is known
        elif submit is not None:
            answer = submit(obs[ids], ids)
        else:
            answer = self._checked(plan(obs[ids], ids), int(ids.numel()))
        t = self.t[ids]
        if self.delay_fn is not None:
            delay = self.delay_fn(ids, t).to(device=self.device, dtype=torch.int64)
            if bool((delay < 0).any()) or bool((delay > self.max_delay).any()):
                raise ValueError(f"delay_fn returned {delay.tolist()}: delays must be in "
                                 f"0..{self.max_delay} steps (the scheduler's D_max)")
        else:
            delay = sample_delays(self.latency, int(ids.numel()), self.generator).to(self.device)
        if self.extra_delay is not None:
            delay = delay + self.extra_delay[ids]
        if coalesce:
            answer = self._hold(plan, obs[ids], ids, int(delay.min()) // 2)
        slot = torch.remainder(self.n_queries[ids], self.slots)
        self._serial += 1
        if submit is not None:
            self._pending.append((answer, ids, slot, self._serial))
        else:
            self._store(ids, slot, answer)
        self.fly_serial[ids, slot] = self._serial
        self.fly_step0[ids, slot] = t
        self.fly_obs_step[ids, slot] = t - obs_delay
        self.fly_arrive[ids, slot] = t + delay
        self.fly_valid[ids, slot] = True
        self.last_delay[ids] = delay
        self.n_queries[ids] += 1

    def _store(self, ids: torch.Tensor, slot: torch.Tensor,
               answer: tuple[torch.Tensor, torch.Tensor | None]) -> None:
        """Write a checked answer (chunks, intent) into the in-flight ``slot`` of ``ids``."""
        chunks, intent = answer
        self.fly[ids, slot] = chunks.to(self.fly.dtype)
        if self.intent_dim:
            self.fly_intent[ids, slot] = intent.to(self.fly_intent.dtype)

    def _checked(self, answer: Any, n: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The planner's answer as detached ``(chunks (n, H, A), intent (n, I) or None)``, or
        a ``ValueError`` naming what is wrong."""
        chunks, intent = answer if isinstance(answer, tuple) else (answer, None)
        if self.intent_dim:
            if not isinstance(intent, torch.Tensor) or tuple(intent.shape) != (n,
                                                                              self.intent_dim):
                got = tuple(intent.shape) if isinstance(intent, torch.Tensor) else type(intent)
                raise ValueError(f"planner returned intent {got}, expected ({n}, "
                                 f"{self.intent_dim}) (the scheduler's intent_dim)")
            intent = intent.detach()
            if not torch.isfinite(intent).all():
                raise ValueError("planner returned a non-finite intent")
        elif intent is not None:
            raise ValueError("planner returned an intent vector but the scheduler has "
                             "intent_dim 0")
        h, a = self.horizon, self.action_dim
        if not isinstance(chunks, torch.Tensor) or tuple(chunks.shape) != (n, h, a):
            got = tuple(chunks.shape) if isinstance(chunks, torch.Tensor) else type(chunks)
            raise ValueError(f"planner returned {got}, expected chunks of shape ({n}, {h}, {a}) "
                             f"for {n} envs with horizon {h}")
        chunks = chunks.detach()  # a network planner's graph must not live in the buffers
        if not torch.isfinite(chunks).all():
            raise ValueError("planner returned non-finite chunk values")
        return chunks, intent

    def _collect(self, arrived: torch.Tensor) -> None:
        """Wait for the pending answers that have a slot arriving now and store them in their
        still-live slots; an answer whose slots were all reset is dropped once it is done."""
        keep = []
        for entry in self._pending:
            future, ids, slot, serial = entry
            live = self.fly_serial[ids, slot] == serial
            if not bool(live.any()):
                if not future.done():  # obsolete (its envs reset): dropped once finished
                    keep.append(entry)
            elif bool((arrived[ids, slot] & live).any()):
                chunks, intent = self._checked(future.result(), int(ids.numel()))
                self._store(ids[live], slot[live],
                            (chunks[live], None if intent is None else intent[live]))
            else:
                keep.append(entry)
        self._pending = keep

    def _hold(self, plan: Any, obs: torch.Tensor, ids: torch.Tensor, slack: int) -> _Held:
        """Hold a query for a coalescing planner; it is sent by ``steps + slack``."""
        held = _Held(self, obs, ids)
        self._held.append(held)
        self._held_plan = plan
        by = self.steps + slack
        self._send_by = by if self._send_by is None else min(self._send_by, by)
        return held

    def _send_held(self) -> None:
        """One ``submit`` with every held query (rows in holding order)."""
        held, self._held, self._send_by = self._held, [], None
        if not held:
            return
        future = self._held_plan.submit(torch.cat([h.obs for h in held]),
                                        torch.cat([h.ids for h in held]))
        start = 0
        for h in held:
            h.sent(future, start)
            start += int(h.ids.numel())

    def drain(self) -> None:
        """Send the held queries, wait for every pending answer (before the planner is
        closed)."""
        self._send_held()
        for future, *_ in self._pending:
            future.result()
        self._pending = []

    def _adopt(self) -> torch.Tensor:
        arrived = self.fly_valid & (self.fly_arrive <= self.t[:, None])
        if self._pending:
            self._collect(arrived)
        if not bool(arrived.any()):
            return torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        # Newest arrived chunk per env (largest step0); a loop over the few slots, because
        # torch's max(dim) with indices is very slow on tiny dims with several threads.
        key = torch.where(arrived, self.fly_step0, torch.full_like(self.fly_step0, -1))
        best_step0, best = key[:, 0], torch.zeros_like(key[:, 0])
        for j in range(1, self.slots):
            newer_slot = key[:, j] > best_step0
            best_step0 = torch.where(newer_slot, key[:, j], best_step0)
            best = torch.where(newer_slot, torch.full_like(best, j), best)
        newer = (best_step0 >= 0) & (~self.cur_valid | is_newer(best_step0, self.cur_step0))
        self.fly_valid &= ~arrived
        ids = newer.nonzero().squeeze(-1)
        if ids.numel():
            slot = best[ids]
            self.prev[ids] = self.cur[ids]
            self.prev_step0[ids] = self.cur_step0[ids]
            self.prev_valid[ids] = self.cur_valid[ids]
            self.cur[ids] = self.fly[ids, slot]
            self.cur_intent[ids] = self.fly_intent[ids, slot]
            self.cur_step0[ids] = self.fly_step0[ids, slot]
            self.cur_obs_step[ids] = self.fly_obs_step[ids, slot]
            self.cur_valid[ids] = True
            self.arrived_at[ids] = self.t[ids]
        return newer

    # --- what the policy sees ---------------------------------------------------------------
    def row_index(self) -> torch.Tensor:
        """Int64 (N,): ``t - step0`` of the current chunk (0 where there is none)."""
        return torch.where(self.cur_valid, self.t - self.cur_step0, torch.zeros_like(self.t))

    def has_chunk(self) -> torch.Tensor:
        """Bool (N,): a chunk has arrived and is not older than ``H + stale_steps`` rows."""
        return self.cur_valid & chunk_usable(self.t - self.cur_step0, self.horizon,
                                             self.stale_steps)

    def age_steps(self) -> torch.Tensor:
        """Int64 (N,): steps since the current chunk's planner observation was taken."""
        return torch.where(self.cur_valid, self.t - self.cur_obs_step, torch.zeros_like(self.t))

    def prev_row_index(self) -> torch.Tensor:
        """Int64 (N,): ``t - step0`` of the previous chunk (for blending)."""
        return torch.where(self.prev_valid, self.t - self.prev_step0, torch.zeros_like(self.t))


class _Held:
    """A query held for a coalescing planner, then its rows of the combined answer."""

    def __init__(self, scheduler: ChunkScheduler, obs: torch.Tensor, ids: torch.Tensor) -> None:
        self.scheduler, self.obs, self.ids = scheduler, obs, ids
        self.future: Any = None
        self.start = 0

    def sent(self, future: Any, start: int) -> None:
        self.future, self.start, self.obs = future, start, None

    def done(self) -> bool:
        return self.future is not None and self.future.done()

    def result(self) -> Any:
        """Its ``(n, H, A)`` rows (and ``(n, I)`` intents, for a planner with an intent);
        sends every held query first if this one was not sent."""
        if self.future is None:
            self.scheduler._send_held()
        rows = slice(self.start, self.start + int(self.ids.numel()))
        answer = self.future.result()
        if isinstance(answer, tuple):
            return tuple(part[rows] for part in answer)
        return answer[rows]
