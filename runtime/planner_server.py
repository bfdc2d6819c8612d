"""Serve any :class:`~edgerl.planner.Planner` over TCP (``edgerl serve-planner``), on asyncio.

Threads: one asyncio event loop (every connection is a coroutine, not a thread) and one
worker thread that runs the planner (``plan`` / ``plan_batch`` block; the loop never does).

Life of a request:

1. **Read**: a frame's first byte may take up to ``idle_timeout_s``; once it has started, the
   rest of the frame must arrive within ``read_timeout_s`` (a client dripping one byte per
   second is cut off, ``read_timeout``). An oversized length prefix gets ``frame_too_large``
   and the connection is closed (the stream cannot be resynchronised).
2. **Check**: authentication tag (when a secret is set), version, fields (see
   :mod:`planner_wire`); a refused message gets a named ``error`` reply and the connection
   stays open, until the client has sent ``max_bad_frames`` of them (then ``quota_exceeded``
   and closed). Each client has a work quota (a token bucket of observation rows per second,
   ``rows_per_s``, burst ``max_batch_rows``); a request beyond it gets ``quota_exceeded``.
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
   running. A planner with ``plan_batch(obs (n, O), instructions, now) -> (n, H, A)``
   answers a whole batch across clients in one call; otherwise each ``plan`` runs alone.
5. **Reply**: ``chunk`` / ``chunk_batch``, or ``deadline_exceeded`` when the answer is late,
   or ``planner_error`` when the planner raised. A client that does not read its replies
   (more than ``max_outbuf`` bytes queued) is closed.

Every failure inside a connection's coroutine ends as a named error reply (``internal`` for
the unexpected) and a log line; nothing can kill the loop or the worker. ``health`` requests
are answered by the loop, so they work while the planner is busy. :meth:`metrics` gives queue
depth, batch sizes, admitted / dropped by reason and p50/p99 latency.

Binding beyond loopback requires a shared secret (:class:`~planner_wire.FrameAuth`).

The planner's ``plan(obs, instruction, now)`` receives the client's ``obs_time`` as ``now``,
so the chunk's ``t0``/``obs_time`` come back in the client's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import queue
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgerl.chunk import ActionChunk
from edgerl.planner import Planner, PlannerHealth
from edgerl.runtime.planner_wire import (
    DEFAULT_MAX_FRAME,
    HEADER,
    PRIORITIES,
    PROTOCOL_VERSION,
    TAG_SIZE,
    FrameAuth,
    PlanRequest,
    WireError,
    batch_to_msg,
    chunk_to_msg,
    decode_payload,
    encode_frame,
    error_msg,
    is_loopback,
    parse_plan_batch_request,
    parse_plan_request,
)

__all__ = ["CostModel", "PlannerServer", "ServerConfig"]

log = logging.getLogger(__name__)

_LATENCY_WINDOW = 2000  # samples kept for percentiles


@dataclass
class ServerConfig:
    """Serving settings.

    Attributes:
        host: Interface to bind (``127.0.0.1``: this machine only; anything else needs
            ``secret``).
        port: TCP port; ``0`` picks a free one (see :attr:`PlannerServer.address`).
        max_frame: Largest accepted request payload (bytes).
        max_clients: Connections beyond this are refused with ``overloaded``.
        obs_dim: Expected observation size (``None``: not checked here).
        secret: Shared secret (>= 16 bytes) for HMAC-SHA256 frame tags; ``None`` = no
            authentication (allowed on loopback only).
        idle_timeout_s: A connection sending no frame for this long is closed
            (``idle_timeout``).
        read_timeout_s: A frame must be complete this long after its first byte
            (``read_timeout``).
        write_timeout_s: A reply that cannot be handed to the kernel within this long closes
            the connection.
        max_outbuf: Reply bytes queued for one client before it counts as not reading.
        max_bad_frames: Refused messages per connection before it is closed.
        max_batch_rows: Largest batch the planner is given (rows), and the largest
            ``plan_batch`` accepted.
        batch_window_s: How long the batcher waits after the oldest queued request for
            others to join its batch.
        rows_per_s: Work quota per client: observation rows per second (token bucket with a
            burst of ``4 * max_batch_rows``).
        max_pending_batches: ``plan_batch`` requests one client may have queued.
        max_queue_rows: Rows queued across all clients before new work is ``overloaded``.
        admission: Refuse work that cannot meet its deadline (``deadline_unmeetable``) and
            skip queued work already past it. ``False``: serve everything in arrival order.
        inline: Run the planner on the event loop thread instead of the worker thread: two
            thread hand-offs fewer per batch (they dominate the round trip of a
            sub-millisecond planner on a busy machine), but no I/O while it computes. Only
            for planners that answer in well under a millisecond (a small MLP).
    """

    host: str = "127.0.0.1"
    port: int = 0
    max_frame: int = DEFAULT_MAX_FRAME
    max_clients: int = 128
    obs_dim: int | None = None
    secret: bytes | None = None
    idle_timeout_s: float = 60.0
    read_timeout_s: float = 2.0
    write_timeout_s: float = 2.0
    max_outbuf: int = 4 << 20
    max_bad_frames: int = 16
    max_batch_rows: int = 256
    batch_window_s: float = 0.002
    rows_per_s: float = 100000.0
    max_pending_batches: int = 2
    max_queue_rows: int = 8192
    admission: bool = True
    inline: bool = False

    def validate(self) -> None:
        """Raise ``ValueError`` naming a bad setting (before anything is bound)."""
        if self.secret is None and not is_loopback(self.host):
            raise ValueError(f"binding {self.host} (beyond loopback) requires a shared secret: "
                             "pass --secret-file or set EDGERL_PLANNER_SECRET")
        if self.secret is not None and len(self.secret) < 16:
            raise ValueError(f"secret must have at least 16 bytes, got {len(self.secret)}")
        for name in ("idle_timeout_s", "read_timeout_s", "write_timeout_s", "rows_per_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("max_frame", "max_clients", "max_bad_frames", "max_batch_rows",
                     "max_pending_batches", "max_queue_rows", "max_outbuf"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.batch_window_s < 0:
            raise ValueError(f"batch_window_s must be >= 0, got {self.batch_window_s}")


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


@dataclass(eq=False)
class _Job:
    """One admitted request waiting for (or in) a batch."""

    session: _Session
    request: PlanRequest
    received: float  # server monotonic seconds
    deadline: float  # absolute server monotonic seconds (inf: none)
    seq: int
    cancelled: bool = False

    @property
    def rank(self) -> tuple[int, float, int]:
        return PRIORITIES.index(self.request.priority), self.deadline, self.seq


@dataclass(eq=False)
class _Session:
    """Bounded state of one connection."""

    cid: int
    peer: str
    writer: asyncio.StreamWriter
    auth: FrameAuth | None
    tokens: float
    refilled: float
    pending_plan: _Job | None = None
    pending_batches: int = 0
    bad_frames: int = 0
    closed: bool = False
    counts: Counter = field(default_factory=Counter)


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


def _settle(fut: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


class PlannerServer:
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
                 "hmac-sha256" if self.config.secret else "off (loopback)")
        return self._address

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
        return {"v": PROTOCOL_VERSION, "type": "health", "id": req_id, "state": state,
                "info": dataclasses.asdict(self.planner.info), "metrics": self.metrics()}

    # --- connections -----------------------------------------------------------------------
    async def _serve_connection(self, reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        peer_s = f"{peer[0]}:{peer[1]}" if peer else "?"
        cfg = self.config
        if len(self._sessions) >= cfg.max_clients:
            self._count("refused")
            log.warning("refusing %s: %d clients already connected", peer_s, cfg.max_clients)
            writer.write(encode_frame(error_msg(-1, "overloaded", "too many clients")))
            await self._close_writer(writer)
            return
        auth = FrameAuth(cfg.secret, side="server") if cfg.secret else None
        session = _Session(next(self._ids), peer_s, writer, auth, tokens=4.0 *
                           cfg.max_batch_rows, refilled=time.monotonic())
        with self._lock:
            self._sessions[session.cid] = session
            self._counters["connections"] += 1
        reason = "closed by peer"
        try:
            if auth is not None:
                writer.write(auth.hello())
            while not session.closed and not self._stopped.is_set():
                body, reason = await self._read_frame(reader, session)
                if body is None:
                    break
                self._handle(session, body)
        except (ConnectionError, OSError) as exc:
            reason = f"connection error: {exc}"
        except asyncio.CancelledError:
            reason = "server stopping"
        except Exception as exc:  # never a dead coroutine without a word
            self._count("internal")
            reason = f"internal error: {type(exc).__name__}: {exc}"
            log.exception("client %s: unexpected error", peer_s)
            self._send(session, error_msg(-1, "internal", f"{type(exc).__name__}: {exc}"))
        finally:
            self._forget(session)
            await self._close_writer(writer)
            log.info("client %d (%s) disconnected: %s", session.cid, peer_s, reason)

    async def _read_frame(self, reader: asyncio.StreamReader, session: _Session
                          ) -> tuple[bytes | None, str]:
        """One frame body (tag included), or ``(None, why)`` when the connection must end."""
        cfg = self.config
        try:
            first = await asyncio.wait_for(reader.readexactly(1), cfg.idle_timeout_s)
        except asyncio.IncompleteReadError:
            return None, "closed by peer"
        except asyncio.TimeoutError:
            self._refuse_and_close(session, "idle_timeout", f"no request for "
                                   f"{cfg.idle_timeout_s:g} s")
            return None, "idle timeout"
        limit = cfg.max_frame + (TAG_SIZE if session.auth else 0)

        async def rest() -> bytes | None:
            (size,) = HEADER.unpack(first + await reader.readexactly(HEADER.size - 1))
            if size > limit:
                self._refuse_and_close(session, "frame_too_large", f"frame of {size} bytes "
                                       f"exceeds the limit of {limit} bytes")
                return None
            return await reader.readexactly(size)

        try:
            body = await asyncio.wait_for(rest(), cfg.read_timeout_s)
            if body is None:
                return None, "frame exceeds the size limit"
        except asyncio.IncompleteReadError:
            return None, "closed mid-frame"
        except asyncio.TimeoutError:
            self._refuse_and_close(session, "read_timeout", f"frame not complete "
                                   f"{cfg.read_timeout_s:g} s after its first byte")
            return None, "read timeout (slow sender)"
        return body, ""

    def _refuse_and_close(self, session: _Session, code: str, message: str) -> None:
        self._count("bad_frames")
        self._drop(code)
        log.warning("client %s: %s: %s; closing the connection", session.peer, code, message)
        self._send(session, error_msg(-1, code, message))
        session.closed = True

    def _handle(self, session: _Session, body: bytes) -> None:
        """Answer or queue one frame; every refusal is a named error reply."""
        req_id = -1
        try:
            if session.auth is not None:
                body = session.auth.open(body)
            msg = decode_payload(body, max_frame=self.config.max_frame,
                                 max_items=max(64, self.config.max_batch_rows))
            raw_id = msg.get("id", -1)
            req_id = raw_id if type(raw_id) is int and abs(raw_id) < (1 << 63) else -1
            kind = msg["type"]
            if kind == "health":
                self._count("health_requests")
                self._send(session, self._health_reply(req_id))
            elif kind == "plan":
                self._admit(session, parse_plan_request(msg, self.config.obs_dim))
            elif kind == "plan_batch":
                if not self._has_batch:
                    raise WireError("unknown_type", "this planner does not answer plan_batch "
                                                    "(it has no plan_batch method)")
                self._admit(session, parse_plan_batch_request(
                    msg, self.config.obs_dim, max_batch=1 << 20))
            else:
                raise WireError("unknown_type", f"message type {kind!r} is not known "
                                                "(plan, plan_batch, health)")
        except WireError as exc:
            if exc.code in ("quota_exceeded", "overloaded", "deadline_unmeetable"):
                self._drop(exc.code)
                log.debug("client %s: %s", session.peer, exc)
            else:
                self._count("bad_frames")
                session.bad_frames += 1
                # the first refusal per connection is a warning; an attacker cannot flood logs
                log.log(logging.WARNING if session.bad_frames == 1 else logging.DEBUG,
                        "client %s: refused a message: %s", session.peer, exc)
            if exc.code == "unauthorized":  # untagged, so a misconfigured client can read it
                session.writer.write(encode_frame(error_msg(req_id, exc.code, exc.message)))
                session.closed = True  # the tag sequence is broken: nothing later can verify
                return
            self._send(session, error_msg(req_id, exc.code, exc.message))
            if session.bad_frames >= self.config.max_bad_frames:
                self._refuse_and_close(session, "quota_exceeded", f"{session.bad_frames} "
                                       "refused messages on this connection")

    # --- admission -------------------------------------------------------------------------
    def _take_tokens(self, session: _Session, rows: int) -> None:
        cfg = self.config
        now = time.monotonic()
        session.tokens = min(4.0 * cfg.max_batch_rows,
                             session.tokens + (now - session.refilled) * cfg.rows_per_s)
        session.refilled = now
        if rows > cfg.max_batch_rows:
            raise WireError("quota_exceeded", f"{rows} rows in one request; the limit is "
                                              f"{cfg.max_batch_rows} (max_batch_rows)")
        if rows > session.tokens:
            raise WireError("quota_exceeded", f"work quota of {cfg.rows_per_s:g} rows/s "
                                              "exceeded; slow down")
        session.tokens -= rows

    def _admit(self, session: _Session, request: PlanRequest) -> None:
        cfg = self.config
        self._count("requests")
        now = time.monotonic()
        self._take_tokens(session, request.rows)
        if request.instructions is not None and session.pending_batches >= \
                cfg.max_pending_batches:
            raise WireError("quota_exceeded", f"{session.pending_batches} plan_batch requests "
                                              "already queued for this client")
        old = session.pending_plan if request.instructions is None else None
        queued = sum(j.request.rows for j in self._queue) - (old.request.rows if old else 0)
        if queued + request.rows > cfg.max_queue_rows:
            raise WireError("overloaded", f"{queued} rows queued (limit {cfg.max_queue_rows})")
        deadline = now + request.deadline_s if request.deadline_s > 0 else float("inf")
        if cfg.admission and deadline < float("inf"):
            finish = self._estimated_finish(request, now, exclude=old)
            if finish > deadline:
                raise WireError("deadline_unmeetable", (
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
            cap = self.config.max_batch_rows
            full, rest = divmod(ahead, cap)
            work = full * self._cost.estimate(cap) + self._cost.estimate(rest + request.rows)
        else:  # one request per planner call
            work = (ahead + 1) * self._cost.estimate(1)
        return max(now, self._inflight_until) + self.config.batch_window_s + work

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
            wait = oldest + self.config.batch_window_s - time.monotonic()
            if self._has_batch and wait > 0 and len(self._sessions) > 1 and sum(
                    j.request.rows for j in self._queue) < self.config.max_batch_rows:
                await asyncio.sleep(wait)
            batch = self._take_batch()
            if not batch:
                continue
            rows = sum(j.request.rows for j in batch)
            self._inflight_until = time.monotonic() + self._cost.estimate(rows)
            assert self._worker is not None
            try:
                if self.config.inline:
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
        rows = 0
        with self._lock:
            self._queue.sort(key=lambda j: j.rank)
            keep: list[_Job] = []
            for job in self._queue:
                if self.config.admission and job.deadline < now + self._cost.estimate(
                        job.request.rows):
                    self._expire(job, now)
                elif not batch or (self._has_batch
                                   and rows + job.request.rows <= self.config.max_batch_rows):
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
        ``ActionChunk``, an ``(n, H, A)`` array or an ``Exception``) and the seconds taken."""
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
            out = np.asarray(self.planner.plan_batch(obs, texts, 0.0), dtype=np.float32)
            if out.ndim != 3 or out.shape[0] != len(texts):
                raise ValueError(f"plan_batch returned shape {out.shape} for {len(texts)} "
                                 "observations (expected (n, H, A))")
        except Exception as exc:
            return [exc] * len(batch)
        results: list[Any] = []
        i = 0
        dt = float(self.planner.info.dt_s)
        for j in batch:
            req = j.request
            if req.instructions is not None:
                results.append(out[i:i + req.rows])
            else:
                try:
                    results.append(ActionChunk(actions=out[i], t0=req.obs_time, dt=dt,
                                               step0=req.step, obs_time=req.obs_time,
                                               source="batch"))
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
            self._send(session, batch_to_msg(req.id, result, self.planner.info.dt_s,
                                             req.obs_time, seconds))
        else:
            self._send(session, chunk_to_msg(req.id, result, seconds))

    # --- output ----------------------------------------------------------------------------
    def _send(self, session: _Session, payload: dict[str, Any]) -> None:
        """Queue a reply on the connection (never blocks); a client that lets more than
        ``max_outbuf`` bytes pile up is closed."""
        if session.writer.is_closing():
            return
        frame = session.auth.seal(payload) if session.auth else encode_frame(payload)
        session.writer.write(frame)
        if session.writer.transport.get_write_buffer_size() > self.config.max_outbuf:
            log.warning("client %s is not reading its replies; closing it", session.peer)
            self._drop("not_reading")
            self._close(session)

    def _close(self, session: _Session) -> None:
        session.closed = True
        if session.writer.transport is not None:
            session.writer.transport.abort()

    def _forget(self, session: _Session) -> None:
        with self._lock:
            self._sessions.pop(session.cid, None)
            for job in [j for j in self._queue if j.session is session]:
                job.cancelled = True
                self._queue.remove(job)
        session.closed = True

    async def _close_writer(self, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.drain(), self.config.write_timeout_s)
        writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.wait_closed(), self.config.write_timeout_s)
