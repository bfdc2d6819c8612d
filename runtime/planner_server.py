"""Serve any :class:`~edgerl.planner.Planner` over TCP (``edgerl serve-planner``).

Threads: one accept loop, one reader and one writer per client, one worker that runs the
planner. Each client has a one-slot queue: a new ``plan`` request replaces the client's
pending one (the replaced one is answered ``superseded``), so a slow planner always works on
the newest observation. The worker serves the client whose pending request is oldest.
Deadlines are budgets from receipt (``deadline_s``), so client and server clocks need not
agree; a request already past its deadline is not run, an answer that finishes late is dropped
(``deadline_exceeded``); both are counted. ``plan_batch`` requests (planners with a
``plan_batch(obs (n, O), instructions, now) -> (n, H, A)`` method) share the same queue.
``health`` requests are answered by the reader thread, so they work while the planner is
busy. Bad input (unknown version, malformed payload) gets an error reply and the connection
stays open; an oversized frame gets an error reply and the connection is closed (the stream
cannot be resynchronised). Other clients never notice.

The planner's ``plan(obs, instruction, now)`` receives the client's ``obs_time`` as ``now``,
so the chunk's ``t0``/``obs_time`` come back in the client's clock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import queue
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgerl.planner import Planner, PlannerHealth
from edgerl.runtime.planner_wire import (
    DEFAULT_MAX_FRAME,
    PROTOCOL_VERSION,
    FrameTooLarge,
    PlanRequest,
    WireError,
    batch_to_msg,
    chunk_to_msg,
    decode_payload,
    encode_frame,
    error_msg,
    parse_plan_batch_request,
    parse_plan_request,
    recv_frame,
)

__all__ = ["PlannerServer", "ServerConfig"]

log = logging.getLogger(__name__)

_OUTBOX_SIZE = 64  # replies queued per client before it counts as not reading
_LATENCY_WINDOW = 2000  # planner latencies kept for percentiles


@dataclass
class ServerConfig:
    """Serving settings.

    Attributes:
        host: Interface to bind (``127.0.0.1``: this machine only; ``0.0.0.0``: all).
        port: TCP port; ``0`` picks a free one (see :attr:`PlannerServer.address`).
        max_frame: Largest accepted request payload (bytes).
        max_clients: Connections beyond this are refused with ``overloaded``.
        obs_dim: Expected observation size (``None``: not checked here).
    """

    host: str = "127.0.0.1"
    port: int = 0
    max_frame: int = DEFAULT_MAX_FRAME
    max_clients: int = 16
    obs_dim: int | None = None


@dataclass
class _Pending:
    request: PlanRequest
    received: float  # server monotonic seconds
    client: _Client


class _Client:
    """One connection: a reader thread (in the server) and a writer thread (here)."""

    def __init__(self, cid: int, sock: socket.socket, peer: str) -> None:
        self.cid = cid
        self.sock = sock
        self.peer = peer
        self.outbox: queue.Queue[bytes | None] = queue.Queue(maxsize=_OUTBOX_SIZE)
        self.closed = threading.Event()
        self.writer = threading.Thread(target=self._write_loop, name=f"planner-tx-{cid}",
                                       daemon=True)
        self.writer.start()

    def send(self, payload: dict[str, Any]) -> None:
        if self.closed.is_set():
            return
        try:
            self.outbox.put_nowait(encode_frame(payload))
        except queue.Full:
            log.warning("client %s is not reading its replies; closing it", self.peer)
            self.close()

    def _write_loop(self) -> None:
        while True:
            frame = self.outbox.get()
            if frame is None:
                return
            try:
                self.sock.sendall(frame)
            except OSError:
                self.close()
                return

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        # a full outbox means the writer is blocked on the socket closed above: it exits
        with contextlib.suppress(queue.Full):
            self.outbox.put_nowait(None)

    def flush_and_close(self, timeout_s: float = 1.0) -> None:
        """Let the writer send what is queued (e.g. a final error), then close."""
        deadline = time.monotonic() + timeout_s
        while not self.outbox.empty() and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.01)
        self.close()


class PlannerServer:
    """A TCP server answering ``plan`` and ``health`` requests with ``planner``.

    Use as a context manager, or ``start()`` / ``stop()``; ``serve_forever()`` blocks.
    """

    def __init__(self, planner: Planner, config: ServerConfig | None = None) -> None:
        self.planner = planner
        self.config = config or ServerConfig()
        self._lock = threading.Condition()
        self._pending: dict[int, _Pending] = {}
        self._clients: dict[int, _Client] = {}
        self._ids = itertools.count(1)
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._latencies: deque[float] = deque(maxlen=_LATENCY_WINDOW)
        self._counters = dict.fromkeys(
            ("connections", "requests", "served", "superseded", "expired", "late", "errors",
             "bad_frames", "health_requests", "refused"), 0)
        self._busy_since: float | None = None
        self._started = time.monotonic()

    # --- life cycle ------------------------------------------------------------------------
    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` actually bound (after :meth:`start`)."""
        if self._listener is None:
            raise RuntimeError("server not started")
        host, port = self._listener.getsockname()[:2]
        return host, port

    def start(self) -> tuple[str, int]:
        """Bind and start the threads; returns the bound address."""
        if self._listener is not None:
            raise RuntimeError("server already started")
        listener = socket.create_server((self.config.host, self.config.port), reuse_port=False)
        listener.settimeout(0.2)
        self._listener = listener
        self._started = time.monotonic()
        for target, name in ((self._accept_loop, "planner-accept"),
                             (self._work_loop, "planner-worker")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        log.info("planner server listening on %s:%d", *self.address)
        return self.address

    def serve_forever(self) -> None:
        """Start (if needed) and block until :meth:`stop` is called or Ctrl-C."""
        if self._listener is None:
            self.start()
        try:
            while not self._stop.wait(0.5):
                pass
        finally:
            self.stop()

    def stop(self, timeout_s: float = 3.0) -> None:
        """Close every connection and join the threads."""
        if self._stop.is_set():
            return
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
            clients = list(self._clients.values())
        for c in clients:
            c.close()
        for t in list(self._threads):
            t.join(timeout_s)
        for c in clients:
            c.writer.join(timeout_s)
        if self._listener is not None:
            self._listener.close()
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            log.warning("planner server threads still running after stop: %s", alive)
        log.info("planner server stopped: %s", self._counters)

    def __enter__(self) -> PlannerServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- metrics ---------------------------------------------------------------------------
    def metrics(self) -> dict[str, Any]:
        """Counters, planner latency percentiles (ms) and connected clients."""
        with self._lock:
            counters = dict(self._counters)
            lat = np.asarray(self._latencies, dtype=np.float64) * 1e3
            clients = len(self._clients)
            pending = len(self._pending)
        out: dict[str, Any] = {**counters, "clients": clients, "pending": pending,
                               "uptime_s": time.monotonic() - self._started}
        if lat.size:
            out.update(latency_p50_ms=float(np.percentile(lat, 50)),
                       latency_p99_ms=float(np.percentile(lat, 99)),
                       latency_max_ms=float(lat.max()))
        return out

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self._counters[key] += n

    def _health_reply(self, req_id: int) -> dict[str, Any]:
        try:
            state = PlannerHealth(self.planner.health()).value
        except Exception as exc:  # a broken planner must not break the health endpoint
            log.warning("planner.health() failed: %s", exc)
            state = PlannerHealth.DEAD.value
        return {"v": PROTOCOL_VERSION, "type": "health", "id": req_id, "state": state,
                "info": dataclasses.asdict(self.planner.info), "metrics": self.metrics()}

    # --- threads ---------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                sock, addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if not self._stop.is_set():
                    log.exception("accept failed")
                return
            sock.settimeout(None)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            cid = next(self._ids)
            client = _Client(cid, sock, f"{addr[0]}:{addr[1]}")
            with self._lock:
                too_many = len(self._clients) >= self.config.max_clients
                if not too_many:
                    self._clients[cid] = client
                    self._counters["connections"] += 1
            if too_many:
                self._count("refused")
                log.warning("refusing %s: %d clients already connected", client.peer,
                            self.config.max_clients)
                client.send(error_msg(-1, "overloaded", "too many clients"))
                client.flush_and_close()
                continue
            log.info("client %d connected from %s", cid, client.peer)
            t = threading.Thread(target=self._read_loop, args=(client,),
                                 name=f"planner-rx-{cid}", daemon=True)
            t.start()
            self._threads.append(t)

    def _read_loop(self, client: _Client) -> None:
        reason = "closed by peer"
        try:
            while not self._stop.is_set() and not client.closed.is_set():
                try:
                    body = recv_frame(client.sock, max_frame=self.config.max_frame)
                except FrameTooLarge as exc:
                    self._count("bad_frames")
                    reason = str(exc)
                    log.warning("client %s: %s; closing the connection", client.peer, exc)
                    client.send(error_msg(-1, exc.code, exc.message))
                    client.flush_and_close()
                    return
                if body is None:
                    return
                self._handle(client, body)
        except (OSError, ConnectionError) as exc:
            reason = f"connection error: {exc}"
        finally:
            with self._lock:
                self._clients.pop(client.cid, None)
                self._pending.pop(client.cid, None)
            client.close()
            log.info("client %d (%s) disconnected: %s", client.cid, client.peer, reason)

    def _handle(self, client: _Client, body: bytes) -> None:
        req_id = -1
        try:
            msg = decode_payload(body, max_frame=self.config.max_frame)
            raw_id = msg.get("id", -1)
            req_id = raw_id if isinstance(raw_id, int) and not isinstance(raw_id, bool) else -1
            kind = msg["type"]
            if kind == "health":
                self._count("health_requests")
                client.send(self._health_reply(req_id))
            elif kind == "plan":
                self._enqueue(client, parse_plan_request(msg, self.config.obs_dim))
            elif kind == "plan_batch":
                if not hasattr(self.planner, "plan_batch"):
                    raise WireError("unknown_type", "this planner does not answer plan_batch "
                                                    "(it has no plan_batch method)")
                self._enqueue(client, parse_plan_batch_request(msg, self.config.obs_dim))
            else:
                raise WireError("unknown_type", f"message type {kind!r} is not known "
                                                "(plan, health)")
        except WireError as exc:
            self._count("bad_frames")
            log.warning("client %s: refused a message: %s", client.peer, exc)
            client.send(error_msg(req_id, exc.code, exc.message))

    def _enqueue(self, client: _Client, request: PlanRequest) -> None:
        with self._lock:
            self._counters["requests"] += 1
            old = self._pending.get(client.cid)
            self._pending[client.cid] = _Pending(request, time.monotonic(), client)
            if old is not None:
                self._counters["superseded"] += 1
            self._lock.notify()
        if old is not None:
            client.send(error_msg(old.request.id, "superseded",
                                  f"replaced by request {request.id} before it was served"))

    def _next_pending(self) -> _Pending | None:
        with self._lock:
            while not self._pending and not self._stop.is_set():
                self._lock.wait(0.5)
            if self._stop.is_set():
                return None
            cid = min(self._pending, key=lambda k: self._pending[k].received)
            return self._pending.pop(cid)

    def _work_loop(self) -> None:
        while True:
            item = self._next_pending()
            if item is None:
                return
            self._serve(item)

    def _serve(self, item: _Pending) -> None:
        req, client = item.request, item.client
        deadline = item.received + req.deadline_s if req.deadline_s > 0 else float("inf")
        start = time.monotonic()
        if start > deadline:
            self._count("expired")
            client.send(error_msg(req.id, "deadline_exceeded",
                                  f"waited {1e3 * (start - item.received):.1f} ms in the queue, "
                                  f"deadline {1e3 * req.deadline_s:.1f} ms"))
            return
        try:
            if req.instructions is not None:
                chunk = self.planner.plan_batch(req.obs, list(req.instructions), req.obs_time)
            else:
                chunk = self.planner.plan(req.obs, req.instruction, req.obs_time)
                if req.step >= 0 and chunk.step0 < 0:
                    chunk = dataclasses.replace(chunk, step0=req.step)
        except Exception as exc:
            self._count("errors")
            log.exception("planner failed on request %d from %s", req.id, client.peer)
            client.send(error_msg(req.id, "planner_error", f"{type(exc).__name__}: {exc}"))
            return
        end = time.monotonic()
        with self._lock:
            self._latencies.append(end - start)
        if end > deadline:
            self._count("late")
            log.debug("request %d answered %.1f ms past its deadline; dropped", req.id,
                      1e3 * (end - deadline))
            client.send(error_msg(req.id, "deadline_exceeded",
                                  f"planner took {1e3 * (end - start):.1f} ms, deadline "
                                  f"{1e3 * req.deadline_s:.1f} ms; answer dropped"))
            return
        self._count("served")
        if req.instructions is not None:
            client.send(batch_to_msg(req.id, chunk, self.planner.info.dt_s, req.obs_time,
                                     end - start))
        else:
            client.send(chunk_to_msg(req.id, chunk, end - start))
