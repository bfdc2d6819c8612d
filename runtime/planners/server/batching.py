"""Admission, batching and the planner worker of :class:`~.server.PlannerServer`.

Steps 3-5 of a request's life (see :mod:`.server`): per-client quotas and the deadline
estimate decide admission (:class:`CostModel` predicts a batch's planner time), the batcher
groups queued requests by priority then deadline, the one worker thread runs the planner, and
each job gets its reply. :class:`_Scheduler` is a mixin: its state lives on the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import queue
import threading
import time
from typing import Any

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.runtime.planners.protocol.framing import PRIORITIES, ProtocolError
from edgerl.runtime.planners.protocol.messages import (
    PlanRequest,
    batch_to_msg,
    chunk_to_msg,
    error_msg,
)
from edgerl.runtime.planners.server.state import _Job, _Session

__all__ = ["CostModel"]

log = logging.getLogger(__name__)


class CostModel:
    """Running estimate of the planner's time for a batch: ``base + per_row * rows`` (s).

    ``base`` follows batches of 1-2 rows, ``per_row`` the extra time per row of larger ones
    (exponential moving averages, weight ``alpha``). Unknown (``None``) until a first batch.
    """

    def __init__(self, alpha: float = 0.2) -> None:
        self.alpha = alpha
        self.base: float | None = None
        self.per_row = 0.0

    def update(self, rows: int, seconds: float) -> None:
        if self.base is None:
            self.base = seconds
        elif rows <= 2:
            self.base += self.alpha * (seconds - self.base)
        else:
            extra = max(0.0, seconds - self.base) / rows
            self.per_row += self.alpha * (extra - self.per_row)

    def estimate(self, rows: int) -> float:
        """Seconds for a batch of ``rows`` (0 while unknown: admit and learn)."""
        return 0.0 if self.base is None else self.base + self.per_row * rows


class _Worker:
    """The one thread that runs the planner: ``submit(loop, fn, *args)`` -> asyncio future."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple | None] = queue.Queue()
        self.thread = threading.Thread(target=self._run, name="planner-worker", daemon=True)
        self.thread.start()

    def submit(self, loop: asyncio.AbstractEventLoop, fn: Any, *args: Any) -> asyncio.Future:
        fut = loop.create_future()
        self._jobs.put((loop, fut, fn, args))
        return fut

    def _run(self) -> None:
        while (item := self._jobs.get()) is not None:
            loop, fut, fn, args = item
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # handed to the awaiting coroutine
                result, error = None, exc
            with contextlib.suppress(RuntimeError):  # the loop has closed (server stopping)
                loop.call_soon_threadsafe(_settle, fut, result, error)

    def stop(self, timeout_s: float) -> bool:
        """Ask the thread to end after its current job; whether it ended within the time."""
        self._jobs.put(None)
        self.thread.join(timeout_s)
        return not self.thread.is_alive()


def _batch_answer(answer: Any, n: int) -> tuple[np.ndarray, np.ndarray | None]:
    """A planner's ``plan_batch`` answer, ``(n, H, A)`` chunks or ``(chunks, intent (n, I))``
    as float32 arrays; ``ValueError`` naming a wrong shape."""
    chunks, intent = answer if isinstance(answer, tuple) else (answer, None)
    out = np.asarray(chunks, dtype=np.float32)
    if out.ndim != 3 or out.shape[0] != n:
        raise ValueError(f"plan_batch returned shape {out.shape} for {n} observations "
                         "(expected (n, H, A))")
    if intent is not None:
        intent = np.asarray(intent, dtype=np.float32)
        if intent.ndim != 2 or intent.shape[0] != n or not np.all(np.isfinite(intent)):
            raise ValueError(f"plan_batch returned an intent of shape {intent.shape} for {n} "
                             "observations (expected finite (n, I))")
    return out, intent


def _settle(fut: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


class _Scheduler:
    """Admission, batching, planner calls and replies (mixin of ``PlannerServer``)."""

    # --- admission -------------------------------------------------------------------------
    def _take_tokens(self, session: _Session, rows: int) -> None:
        max_rows, rows_per_s = self.config.batching.max_batch_rows, self.config.quotas.rows_per_s
        now = time.monotonic()
        session.tokens = min(4.0 * max_rows,
                             session.tokens + (now - session.refilled) * rows_per_s)
        session.refilled = now
        if rows > max_rows:
            raise ProtocolError("quota_exceeded", f"{rows} rows in one request; the limit is "
                                                  f"{max_rows} (max_batch_rows)")
        if rows > session.tokens:
            raise ProtocolError("quota_exceeded", f"work quota of {rows_per_s:g} rows/s "
                                                  "exceeded; slow down")
        session.tokens -= rows

    def _admit(self, session: _Session, request: PlanRequest) -> None:
        cfg = self.config.quotas
        self._count("requests")
        now = time.monotonic()
        self._take_tokens(session, request.rows)
        if request.instructions is not None and session.pending_batches >= \
                cfg.max_pending_batches:
            raise ProtocolError("quota_exceeded", f"{session.pending_batches} plan_batch requests "
                                                  "already queued for this client")
        old = session.pending_plan if request.instructions is None else None
        queued = sum(j.request.rows for j in self._queue) - (old.request.rows if old else 0)
        if queued + request.rows > cfg.max_queue_rows:
            raise ProtocolError("overloaded", f"{queued} rows queued (limit {cfg.max_queue_rows})")
        deadline = now + request.deadline_s if request.deadline_s > 0 else float("inf")
        if cfg.admission and deadline < float("inf"):
            finish = self._estimated_finish(request, now, exclude=old)
            if finish > deadline:
                raise ProtocolError("deadline_unmeetable", (
                    f"estimated to finish in {1e3 * (finish - now):.1f} ms, deadline "
                    f"{1e3 * request.deadline_s:.1f} ms"))
        job = _Job(session, request, now, deadline, next(self._seq))
        with self._lock:
            if old is not None:
                old.cancelled = True
                self._queue.remove(old)
                self._counters["superseded"] += 1
                self._dropped["superseded"] += 1
            self._queue.append(job)
            self._counters["admitted"] += 1
        if old is not None:
            self._send(session, error_msg(old.request.id, "superseded",
                                          f"replaced by request {request.id} before it was "
                                          "served"))
        if request.instructions is None:
            session.pending_plan = job
        else:
            session.pending_batches += 1
        assert self._wakeup is not None
        self._wakeup.set()

    def _estimated_finish(self, request: PlanRequest, now: float,
                          exclude: _Job | None) -> float:
        """When ``request`` would be answered: the batch in flight, the queued work of its
        priority or higher (in batches of ``max_batch_rows``), then its own batch."""
        level = PRIORITIES.index(request.priority)
        ahead = sum(j.request.rows for j in self._queue
                    if j is not exclude and PRIORITIES.index(j.request.priority) <= level)
        if self._has_batch:
            cap = self.config.batching.max_batch_rows
            full, rest = divmod(ahead, cap)
            work = full * self._cost.estimate(cap) + self._cost.estimate(rest + request.rows)
        else:  # one request per planner call
            work = (ahead + 1) * self._cost.estimate(1)
        return max(now, self._inflight_until) + self.config.batching.batch_window_s + work

    # --- batching --------------------------------------------------------------------------
    async def _batch_loop(self) -> None:
        assert self._wakeup is not None and self._loop is not None
        while not self._stopped.is_set():
            if not self._queue:
                self._wakeup.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), 0.2)
                continue
            oldest = min(j.received for j in self._queue)
            wait = oldest + self.config.batching.batch_window_s - time.monotonic()
            if self._has_batch and wait > 0 and len(self._sessions) > 1 and sum(
                    j.request.rows for j in self._queue) < self.config.batching.max_batch_rows:
                await asyncio.sleep(wait)
            batch = self._take_batch()
            if not batch:
                continue
            rows = sum(j.request.rows for j in batch)
            self._inflight_until = time.monotonic() + self._cost.estimate(rows)
            assert self._worker is not None
            try:
                if self.config.batching.inline:
                    results, seconds = self._compute(batch)
                else:
                    results, seconds = await self._worker.submit(self._loop, self._compute,
                                                                 batch)
            finally:
                self._inflight_until = 0.0
            self._cost.update(rows, seconds)
            with self._lock:
                self._latencies.append(seconds)
                self._batch_rows.append(rows)
                self._counters["batches"] += 1
            for job, result in zip(batch, results):
                self._reply(job, result, seconds)

    def _take_batch(self) -> list[_Job]:
        """Pop the next batch: by priority then deadline, up to ``max_batch_rows`` rows (one
        request for a planner without ``plan_batch``: each answer leaves as soon as it is
        ready); with admission, jobs that can no longer meet their deadline are answered
        instead."""
        now = time.monotonic()
        batch: list[_Job] = []
        rows, cap = 0, self.config.batching.max_batch_rows
        with self._lock:
            self._queue.sort(key=lambda j: j.rank)
            keep: list[_Job] = []
            for job in self._queue:
                if self.config.quotas.admission and job.deadline < now + self._cost.estimate(
                        job.request.rows):
                    self._expire(job, now)
                elif not batch or (self._has_batch
                                   and rows + job.request.rows <= cap):
                    batch.append(job)
                    rows += job.request.rows
                else:
                    keep.append(job)
            self._queue = keep
        for job in batch:
            self._release(job)
        return batch

    def _release(self, job: _Job) -> None:
        s = job.session
        if s.pending_plan is job:
            s.pending_plan = None
        elif job.request.instructions is not None:
            s.pending_batches = max(0, s.pending_batches - 1)

    def _expire(self, job: _Job, now: float) -> None:
        """Answer a queued job that can no longer meet its deadline (lock held)."""
        self._counters["expired"] += 1
        self._dropped["deadline_exceeded"] += 1
        self._release(job)
        self._send(job.session, error_msg(job.request.id, "deadline_exceeded", (
            f"waited {1e3 * (now - job.received):.1f} ms in the queue, deadline "
            f"{1e3 * job.request.deadline_s:.1f} ms")))

    def _compute(self, batch: list[_Job]) -> tuple[list[Any], float]:
        """Run the planner on a batch (worker thread). Returns one result per job (an
        ``ActionChunk``, a ``plan_batch`` answer ``((n, H, A), (n, I) or None)`` or an
        ``Exception``) and the seconds taken."""
        start = time.monotonic()
        merged = self._has_batch and (len(batch) > 1 or batch[0].request.instructions
                                      is not None)
        if merged:
            results = self._compute_merged(batch)
        else:
            results = []
            for job in batch:
                req = job.request
                try:
                    chunk = self.planner.plan(req.obs, req.instruction, req.obs_time)
                    if req.step >= 0 and chunk.step0 < 0:
                        chunk = dataclasses.replace(chunk, step0=req.step)
                    results.append(chunk)
                except Exception as exc:
                    results.append(exc)
        return results, time.monotonic() - start

    def _compute_merged(self, batch: list[_Job]) -> list[Any]:
        """One ``plan_batch`` call for every row of every job; chunks start at ``now=0`` and
        are placed at each request's ``obs_time``."""
        obs = np.concatenate([np.atleast_2d(j.request.obs) for j in batch]).astype(np.float32)
        texts: list[str] = []
        for j in batch:
            texts.extend(j.request.instructions if j.request.instructions is not None
                         else [j.request.instruction])
        try:
            out, intent = _batch_answer(self.planner.plan_batch(obs, texts, 0.0), len(texts))
        except Exception as exc:
            return [exc] * len(batch)
        results: list[Any] = []
        i = 0
        dt = float(self.planner.info.dt_s)
        for j in batch:
            req = j.request
            if req.instructions is not None:
                results.append((out[i:i + req.rows],
                                None if intent is None else intent[i:i + req.rows]))
            else:
                try:
                    results.append(ActionChunk(actions=out[i], t0=req.obs_time, dt=dt,
                                               step0=req.step, obs_time=req.obs_time,
                                               source="batch",
                                               intent=None if intent is None else intent[i]))
                except ValueError as exc:
                    results.append(exc)
            i += req.rows
        return results

    def _reply(self, job: _Job, result: Any, seconds: float) -> None:
        req, session = job.request, job.session
        end = time.monotonic()
        if isinstance(result, Exception):
            self._count("errors")
            self._drop("planner_error")
            log.warning("planner failed on request %d from %s: %s: %s", req.id, session.peer,
                        type(result).__name__, result)
            self._send(session, error_msg(req.id, "planner_error",
                                          f"{type(result).__name__}: {result}"))
            return
        if end > job.deadline:
            self._count("late")
            self._drop("late")
            self._send(session, error_msg(req.id, "deadline_exceeded", (
                f"answered {1e3 * (end - job.received):.1f} ms after receipt (planner "
                f"{1e3 * seconds:.1f} ms), deadline {1e3 * req.deadline_s:.1f} ms; "
                "answer dropped")))
            return
        with self._lock:
            self._counters["served"] += 1
            self._responses.append(end - job.received)
        if req.instructions is not None:
            actions, intent = result
            self._send(session, batch_to_msg(req.id, actions, self.planner.info.dt_s,
                                             req.obs_time, seconds, intent=intent,
                                             version=req.version))
        else:
            self._send(session, chunk_to_msg(req.id, result, seconds, version=req.version))
