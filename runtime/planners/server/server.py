"""Serve any :class:`~edgerl.contract.planner.Planner` over TCP (``edgerl serve-planner``), on
asyncio.

Threads: one asyncio event loop (every connection is a coroutine, not a thread) and one
worker thread that runs the planner (``plan`` / ``plan_batch`` block; the loop never does).

Life of a request:

1. **Read**: a frame's first byte may take up to ``idle_timeout_s``; once it has started, the
   rest of the frame must arrive within ``read_timeout_s`` (a client dripping one byte per
   second is cut off, ``read_timeout``). An oversized length prefix gets ``frame_too_large``
   and the connection is closed (the stream cannot be resynchronised).
2. **Check**: authentication tag (when a secret or named keys are set: the key the client's
   hello names, else the shared secret), version, fields (see
   :mod:`~edgerl.runtime.planners.protocol.messages`); a refused message gets a named
   ``error`` reply and the connection stays open, until the client has sent
   ``max_bad_frames`` of them (then ``quota_exceeded`` and closed). Each client has a work
   quota (a token bucket of observation rows per second, ``rows_per_s``, burst
   ``max_batch_rows``); a request beyond it gets ``quota_exceeded``. A request claiming a
   priority more urgent than its client's key allows (``ClientKey.max_priority``) gets
   ``priority_denied``.
3. **Admit**: each client holds at most one pending ``plan`` (a newer one replaces it, the old
   one is answered ``superseded``) and ``max_pending_batches`` ``plan_batch`` requests: the
   per-session state is bounded. With a deadline (``deadline_s`` > 0, a budget from receipt),
   the server estimates when the request would finish (queue ahead of it at its priority +
   the batch in flight + its own cost, from a running model of the planner's cost per batch
   and per row) and refuses it at once with ``deadline_unmeetable`` when that is past the
   deadline: the queue never fills with work that will be thrown away (admission control).
   ``admission=False`` turns this off (the unbounded baseline of ``bench planner --load-sweep``).
4. **Batch**: the batcher takes requests by priority (``robot`` before ``training``), then
   earliest deadline, up to ``max_batch_rows`` rows, waiting at most ``batch_window_s`` after
   the oldest one for others to join (planners with ``plan_batch``, when more than one client
   is connected). Requests past their deadline are answered ``deadline_exceeded`` without
   running. A planner with ``plan_batch(obs (n, O), instructions, now) -> (n, H, A)`` (or
   ``(chunks, intent (n, I))``) answers a whole batch across clients in one call; otherwise
   each ``plan`` runs alone.
5. **Reply**: ``chunk`` / ``chunk_batch`` in the request's protocol version (the planner's
   intent in a version 2 reply), or ``deadline_exceeded`` when the answer is late, or
   ``planner_error`` when the planner raised. A client that does not read its replies
   (more than ``max_outbuf`` bytes queued) is closed.

Every failure inside a connection's coroutine ends as a named error reply (``internal`` for
the unexpected) and a log line; nothing can kill the loop or the worker. ``health`` requests
are answered by the loop, so they work while the planner is busy. :meth:`metrics` gives queue
depth, batch sizes, admitted / dropped by reason and p50/p99 latency.

Binding beyond loopback requires a shared secret or named client keys
(:class:`~edgerl.runtime.planners.protocol.auth.FrameAuth`,
:class:`~edgerl.runtime.planners.server.config.ClientKey`).

The planner's ``plan(obs, instruction, now)`` receives the client's ``obs_time`` as ``now``,
so the chunk's ``t0``/``obs_time`` come back in the client's clock.

Files: this one (life cycle, metrics, health), :mod:`.config` (settings), :mod:`.connections`
(steps 1-2), :mod:`.batching` (steps 3-5), :mod:`.state` (the connection and request records
both share).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import threading
import time
from collections import Counter, deque
from typing import Any

import numpy as np

from edgerl.contract.planner import Planner, PlannerHealth
from edgerl.runtime.planners.protocol.framing import (
    BASE_VERSION,
    HEADER,
    SUPPORTED_VERSIONS,
    TAG_SIZE,
)
from edgerl.runtime.planners.protocol.messages import error_msg
from edgerl.runtime.planners.server.batching import CostModel, _Scheduler, _Worker
from edgerl.runtime.planners.server.config import ServerConfig
from edgerl.runtime.planners.server.connections import _Connections
from edgerl.runtime.planners.server.state import _Job, _Session

__all__ = ["PlannerServer", "ServerConfig"]

log = logging.getLogger(__name__)

_LATENCY_WINDOW = 2000  # samples kept for percentiles


class PlannerServer(_Connections, _Scheduler):
    """An asyncio TCP server answering ``plan``, ``plan_batch`` and ``health`` with ``planner``.

    Use as a context manager, or ``start()`` / ``stop()``; ``serve_forever()`` blocks.
    """

    def __init__(self, planner: Planner, config: ServerConfig | None = None) -> None:
        self.planner = planner
        self.config = config or ServerConfig()
        self.config.validate()
        self._lock = threading.Lock()  # guards the metrics read from other threads
        self._queue: list[_Job] = []
        self._sessions: dict[int, _Session] = {}
        self._ids = itertools.count(1)
        self._seq = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._worker: _Worker | None = None
        self._server: asyncio.base_events.Server | None = None
        self._wakeup: asyncio.Event | None = None
        self._stopped = threading.Event()
        self._address: tuple[str, int] | None = None
        self._cost = CostModel()
        self._inflight_until = 0.0  # estimated end of the batch being computed
        self._latencies: deque[float] = deque(maxlen=_LATENCY_WINDOW)  # planner compute (s)
        self._responses: deque[float] = deque(maxlen=_LATENCY_WINDOW)  # receipt -> reply (s)
        self._batch_rows: deque[int] = deque(maxlen=_LATENCY_WINDOW)
        self._counters: Counter[str] = Counter(dict.fromkeys(
            ("connections", "requests", "served", "superseded", "expired", "late", "errors",
             "bad_frames", "health_requests", "refused", "admitted", "batches", "internal"),
            0))
        self._dropped: Counter[str] = Counter()
        self._started = time.monotonic()
        self._has_batch = callable(getattr(planner, "plan_batch", None))

    # --- life cycle ------------------------------------------------------------------------
    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` actually bound (after :meth:`start`)."""
        if self._address is None:
            raise RuntimeError("server not started")
        return self._address

    def start(self) -> tuple[str, int]:
        """Bind and start the event loop thread and the planner worker; returns the address.

        Raises ``OSError`` when the address cannot be bound.
        """
        if self._thread is not None:
            raise RuntimeError("server already started")
        self._worker = _Worker()
        ready: dict[str, Any] = {}
        started = threading.Event()
        self._thread = threading.Thread(target=self._run_loop, args=(ready, started),
                                        name="planner-server", daemon=True)
        self._thread.start()
        started.wait(10.0)
        if "error" in ready:
            self._thread.join(2.0)
            self._worker.stop(2.0)
            raise ready["error"]
        self._address = ready["address"]
        self._started = time.monotonic()
        log.info("planner server listening on %s:%d (auth %s)", *self._address,
                 self._auth_summary())
        return self._address

    def _auth_summary(self) -> str:
        """How clients authenticate, for the log: off, the shared secret, named keys."""
        cfg = self.config
        if cfg.secret is None and not cfg.client_keys:
            return "off (loopback)"
        parts = ["shared secret"] if cfg.secret is not None else []
        parts += [f"{k} (up to {v.max_priority})" for k, v in sorted(cfg.client_keys.items())]
        return "hmac-sha256: " + ", ".join(parts)

    def _run_loop(self, ready: dict[str, Any], started: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(ready, started))
        except BaseException as exc:  # bind errors reach start() through `ready`
            if "address" not in ready:
                ready["error"] = exc
                started.set()
            else:
                log.exception("planner server loop ended with an error")
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _main(self, ready: dict[str, Any], started: threading.Event) -> None:
        self._wakeup = asyncio.Event()
        self._server = await asyncio.start_server(self._serve_connection, self.config.host,
                                                  self.config.port, limit=self.config.max_frame
                                                  + HEADER.size + TAG_SIZE)
        sock = self._server.sockets[0]
        ready["address"] = tuple(sock.getsockname()[:2])
        started.set()
        batcher = asyncio.ensure_future(self._batch_loop())
        try:
            while not self._stopped.is_set():
                await asyncio.sleep(0.05)
        finally:
            self._server.close()
            batcher.cancel()
            for s in list(self._sessions.values()):
                self._send(s, error_msg(-1, "shutting_down", "the planner server is stopping"))
                s.closed = True
                s.writer.close()  # flushes the reply, unlike abort()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await batcher
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def serve_forever(self) -> None:
        """Start (if needed) and block until :meth:`stop` is called or Ctrl-C."""
        if self._thread is None:
            self.start()
        try:
            while not self._stopped.wait(0.5):
                pass
        finally:
            self.stop()

    def stop(self, timeout_s: float = 3.0) -> None:
        """Close every connection, stop the loop and the worker (idempotent)."""
        if self._stopped.is_set() or self._thread is None:
            self._stopped.set()
            return
        self._stopped.set()
        self._thread.join(timeout_s)
        if self._worker is not None and not self._worker.stop(timeout_s):
            log.warning("the planner is still computing after stop (its worker thread ends "
                        "when plan() returns)")
        if self._thread.is_alive():
            log.warning("planner server loop still running after stop")
        log.info("planner server stopped: %s", dict(self._counters))

    def __enter__(self) -> PlannerServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- metrics ---------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        """Counters, queue depth, batch sizes, drops by reason and latency percentiles (ms).

        ``latency_*``: planner compute time per batch; ``response_*``: server receipt to
        reply, per request (queueing included).
        """
        with self._lock:
            out: dict[str, Any] = dict(self._counters)
            lat = np.asarray(self._latencies, dtype=np.float64) * 1e3
            resp = np.asarray(self._responses, dtype=np.float64) * 1e3
            rows = np.asarray(self._batch_rows, dtype=np.float64)
            out.update(clients=len(self._sessions), queue_depth=len(self._queue),
                       queue_rows=sum(j.request.rows for j in self._queue),
                       dropped=dict(self._dropped), uptime_s=time.monotonic() - self._started)
        out["pending"] = out["queue_depth"]
        out["threads_alive"] = {
            "loop": bool(self._thread and self._thread.is_alive()),
            "worker": bool(self._worker and self._worker.thread.is_alive())}
        for name, arr in (("latency", lat), ("response", resp)):
            if arr.size:
                out[f"{name}_p50_ms"] = float(np.percentile(arr, 50))
                out[f"{name}_p99_ms"] = float(np.percentile(arr, 99))
                out[f"{name}_max_ms"] = float(arr.max())
        if rows.size:
            out.update(batch_rows_p50=float(np.percentile(rows, 50)),
                       batch_rows_max=int(rows.max()), batch_rows_mean=float(rows.mean()))
        if self._cost.base is not None:
            out["cost_model_ms"] = {"base": 1e3 * self._cost.base,
                                    "per_row": 1e3 * self._cost.per_row}
        return out

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counters[key] += n

    def _drop(self, reason: str) -> None:
        with self._lock:
            self._dropped[reason] += 1

    def _health_reply(self, req_id: int) -> dict[str, Any]:
        try:
            state = PlannerHealth(self.planner.health()).value
        except Exception as exc:  # a broken planner must not break the health endpoint
            log.warning("planner.health() failed: %s", exc)
            state = PlannerHealth.DEAD.value
        return {"v": BASE_VERSION, "type": "health", "id": req_id, "state": state,
                "info": dataclasses.asdict(self.planner.info), "metrics": self.metrics(),
                "versions": list(SUPPORTED_VERSIONS)}
