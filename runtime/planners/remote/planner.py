"""``RemotePlanner``: the client side of planner serving (protocol:
:mod:`edgerl.runtime.planners.protocol.framing`).

Implements :class:`edgerl.contract.planner.Planner` for a planner running in another process or on
another machine (``edgerl serve-planner``, or a user's own VLA speaking the protocol in
``docs/planner.md``). Two ways to use it:

* asynchronous (the edit loop): ``request(obs, instruction, now)`` returns at once (it only
  stores the observation in a one-slot outbox; a sender thread ships the newest one), and
  ``latest()`` returns the newest chunk received so far. Neither call ever waits on the
  network or the planner.
* synchronous (benchmarks, scripts): ``plan(obs, instruction, now)`` waits for the answer.

A chunk that arrives after its request's deadline is dropped and counted (``late``). After a
disconnect the client reconnects in the background with exponential backoff (``reconnect_s``
doubling up to ``reconnect_max_s``, with jitter); meanwhile ``health()`` is ``DEAD``.

Every reply is validated before it can reach ``latest()``: it must answer a request this
client sent on this connection (``unsolicited`` otherwise), echo that request's ``obs_time``
exactly, start within ``max_future_s`` of it (a chunk claiming ``obs_time = 1e300`` or one
hour ahead would otherwise pin ``latest()`` forever), have the server's ``(H, A)`` shape and
finite values. A rejected reply is counted (``rejected_<reason>``) and logged; the receive
thread survives anything a server sends. ``health()`` is honest: ``DEAD`` when disconnected,
when the receive thread is gone or when a request has had no answer for ``dead_after_s``;
``SLOW`` when one has waited more than ``slow_factor`` x the expected latency (+ 5 ms).

Requests go out in the newest protocol version both sides speak (the server's health reply
lists its versions; an older server gets version 1 requests), so a version 2 server's chunks
carry the planner's intent (``ActionChunk.intent``, checked against ``info.intent_dim``).

With ``secret`` set, the client expects the server's ``hello`` and tags every frame
(:class:`~edgerl.runtime.planners.protocol.auth.FrameAuth`); a server that asks for
authentication from a client without the secret is reported as ``unauthorized``. With
``key_id`` set too, the client's first frame is its own ``hello`` naming that key (a server
that does not know it answers ``unknown_key``), and a request above the key's priority is
answered ``priority_denied``.

Files: this one (life cycle, robot requests, health), :mod:`.config` (settings, errors),
:mod:`.batch` (``plan_batch`` / ``plan_many``), :mod:`.io` (the I/O threads and reply
checks).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.config_groups import change
from edgerl.contract.planner import PlannerHealth, PlannerInfo
from edgerl.runtime.planners.protocol.auth import FrameAuth, check_welcome, client_hello
from edgerl.runtime.planners.protocol.framing import (
    BASE_VERSION,
    PRIORITIES,
    TAG_SIZE,
    ProtocolError,
    decode_payload,
    encode_array,
    recv_frame,
)
from edgerl.runtime.planners.protocol.messages import chunk_from_msg, negotiated_version
from edgerl.runtime.planners.remote.batch import _BatchRequests
from edgerl.runtime.planners.remote.config import (
    RemotePlannerConfig,
    RemotePlannerError,
    _Outgoing,
    _Sent,
    _Waiter,
)
from edgerl.runtime.planners.remote.io import _RemoteIO

__all__ = ["RemotePlanner"]

log = logging.getLogger(__name__)


class RemotePlanner(_BatchRequests, _RemoteIO):
    """A :class:`~edgerl.contract.planner.Planner` whose model runs behind a planner server."""

    def __init__(self, config: RemotePlannerConfig | None = None, **overrides: Any) -> None:
        cfg = config or RemotePlannerConfig()
        if overrides:
            cfg = change(cfg, **overrides)
        self.config = cfg
        self.info = PlannerInfo(horizon=1, action_dim=1, dt_s=1.0, period_s=1.0,
                                expected_latency_s=0.0)  # replaced by the server's in start()
        self.server_state = PlannerHealth.STARTING.value
        self._sock: socket.socket | None = None
        self._connected = threading.Event()
        self._ever_connected = False
        self._closing = threading.Event()
        self._cv = threading.Condition()
        self._send_lock = threading.Lock()
        self._outbox: _Outgoing | None = None
        self._ids = itertools.count(1)
        self._sent: dict[int, _Sent] = {}
        self._auth: FrameAuth | None = None
        self._backoff = cfg.reconnect.reconnect_s
        self._info_known = False  # info comes from the server's health reply in start()
        self._waiters: dict[int, _Waiter] = {}
        self._latest: ActionChunk | None = None
        self._rtts: deque[float] = deque(maxlen=1000)
        self._counts: Counter[str] = Counter()
        self._threads: list[threading.Thread] = []
        self._conn_error: dict[str, Any] | None = None  # last connection-level error reply
        #: Protocol version of the requests sent (the server's newest we speak, from its
        #: health reply in start(); version 2 replies carry the planner intent).
        self.version = BASE_VERSION

    # --- life cycle ------------------------------------------------------------------------
    def start(self) -> RemotePlanner:
        """Connect, fetch the server's :class:`PlannerInfo`, start the I/O threads.

        Raises :class:`RemotePlannerError` (``unreachable``) when no server answers within
        ``connect_timeout_s``.
        """
        deadline = time.monotonic() + self.config.reconnect.connect_timeout_s
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                self._connect()
                break
            except OSError as exc:
                last = exc
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        else:
            raise RemotePlannerError("unreachable", f"no planner server at {self.config.host}:"
                                                    f"{self.config.port} ({last})")
        for target, name in ((self._recv_loop, "remote-planner-rx"),
                             (self._send_loop, "remote-planner-tx")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        try:
            reply = self.query_health(timeout_s=max(1.0, deadline - time.monotonic()))
            info = reply.get("info")
            self.info = PlannerInfo(**{k: info[k] for k in (
                "horizon", "action_dim", "dt_s", "period_s", "expected_latency_s")},
                intent_dim=int(info.get("intent_dim", 0)))
            self._info_known = True
            self.version = negotiated_version(reply)
        except (TypeError, KeyError) as exc:
            self.close()
            raise RemotePlannerError("malformed", f"the server's health reply has no valid "
                                                  f"info ({exc!r})") from exc
        except RemotePlannerError as exc:
            self.close()
            refused = self._conn_error
            if refused is not None and exc.code != refused.get("code"):
                raise RemotePlannerError(str(refused.get("code")),
                                         str(refused.get("message"))) from exc
            raise
        except BaseException:
            self.close()
            raise
        return self

    def _connect(self) -> None:
        sock = socket.create_connection((self.config.host, self.config.port),
                                        timeout=self.config.reconnect.connect_timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._auth = self._handshake(sock) if self.config.secret is not None else None
        except BaseException:
            sock.close()
            raise
        sock.settimeout(None)
        with self._cv:
            self._sent.clear()
            self._conn_error = None  # a refusal of an earlier connection is history
        self._sock = sock
        self._ever_connected = True
        self._connected.set()
        log.info("connected to planner server %s:%d", self.config.host, self.config.port)

    def _handshake(self, sock: socket.socket) -> FrameAuth:
        """Read the authenticated server's ``hello`` (within ``connect_timeout_s``); with a
        ``key_id``, send the client's hello naming it."""
        assert self.config.secret is not None
        try:
            body = recv_frame(sock, max_frame=4096)
        except TimeoutError as exc:
            raise RemotePlannerError("unauthorized", "the server sent no authentication "
                                                     "hello: it runs without a secret, or is "
                                                     "not a planner server") from exc
        if body is None:
            raise ConnectionError("server closed the connection before its hello")
        msg = decode_payload(body)
        nonce = msg.get("nonce")
        if msg.get("type") != "hello" or not isinstance(nonce, bytes) or len(nonce) != 16:
            raise RemotePlannerError("unauthorized", f"expected the server's hello, got "
                                                     f"{msg.get('type')!r}")
        auth = FrameAuth(self.config.secret, nonce, side="client")
        if self.config.key_id is not None:
            sock.sendall(auth.seal(client_hello(self.config.key_id)))
            self._welcome(sock, auth, self.config.key_id)
        return auth

    def _welcome(self, sock: socket.socket, auth: FrameAuth, key_id: str) -> None:
        """Read the server's answer to our hello naming ``key_id``: its ``welcome``, or an
        untagged refusal (``unknown_key``, ``unauthorized``) raised as
        :class:`RemotePlannerError` with the server's code."""
        try:
            body = recv_frame(sock, max_frame=4096 + TAG_SIZE)
        except TimeoutError as exc:
            raise RemotePlannerError("unauthorized", f"the server did not answer the hello "
                                                     f"of key {key_id!r}") from exc
        if body is None:
            raise ConnectionError("server closed the connection before its welcome")
        try:
            msg = decode_payload(auth.open(body))
        except ProtocolError as exc:  # an untagged refusal, or a bad tag
            try:
                msg = decode_payload(body)
            except ProtocolError:
                msg = {}
            if msg.get("type") != "error":
                raise RemotePlannerError("unauthorized", f"the answer to our hello failed "
                                                         f"authentication ({exc.message}); is "
                                                         "the key's secret right?") from exc
        try:
            allowed = check_welcome(msg, key_id)
        except ProtocolError as exc:
            raise RemotePlannerError(exc.code, exc.message) from exc
        if allowed in PRIORITIES and \
                PRIORITIES.index(self.config.priority) < PRIORITIES.index(allowed):
            log.warning("key %r may claim priority %r at most; requests at %r will be refused "
                        "(priority_denied)", key_id, allowed, self.config.priority)

    def close(self) -> None:
        """Disconnect and join the I/O threads (idempotent)."""
        self._closing.set()
        self._drop_connection()
        with self._cv:
            self._cv.notify_all()
            for w in self._waiters.values():
                w.event.set()
        for t in self._threads:
            t.join(2.0)
        self._threads.clear()

    def __enter__(self) -> RemotePlanner:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _drop_connection(self) -> None:
        self._connected.clear()
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        with self._cv:  # answers to what was sent on that connection will never come
            self._sent.clear()
            waiters = list(self._waiters.values())
        for w in waiters:
            if w.reply is None:
                w.reply = {"type": "error", "code": "disconnected",
                           "message": "connection to the planner server lost"}
            w.event.set()

    # --- Planner protocol ------------------------------------------------------------------
    def request(self, observation: np.ndarray, instruction: str, now: float,
                step: int = -1) -> int:
        """Queue a plan request for the newest observation; returns its id at once.

        A request not yet sent is replaced (only the newest observation matters).
        """
        if not math.isfinite(now):
            raise ValueError(f"now must be a finite time, got {now}")
        obs = np.ascontiguousarray(observation, dtype=np.float32).reshape(-1)
        req_id = next(self._ids)
        payload = {"v": self.version, "type": "plan", "id": req_id,
                   "obs": encode_array(obs), "obs_time": float(now),
                   "instruction": instruction, "deadline_s": self.config.deadline_s,
                   "step": int(step), "priority": self.config.priority}
        with self._cv:
            if self._outbox is not None:
                self._counts["replaced_unsent"] += 1
            self._outbox = _Outgoing(req_id, payload, time.monotonic(), self.config.deadline_s,
                                     float(now))
            self._cv.notify_all()
        return req_id

    def latest(self) -> ActionChunk | None:
        """The newest chunk received (by observation time), or ``None`` before the first."""
        return self._latest

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        """Blocking round trip; raises :class:`RemotePlannerError` on an error reply or when
        no answer arrives within the deadline (or 10 s when there is none)."""
        if not self._connected.is_set():
            raise RemotePlannerError("disconnected", f"not connected to the planner server at "
                                                     f"{self.config.host}:{self.config.port}")
        waiter = _Waiter(threading.Event())
        with self._cv:
            req_id = self.request(observation, instruction, now)
            self._waiters[req_id] = waiter
        timeout = self.config.deadline_s + 1.0 if self.config.deadline_s > 0 else 10.0
        return chunk_from_msg(self._await_reply(req_id, waiter, timeout, "request"))

    def _await_reply(self, req_id: int, waiter: _Waiter, timeout_s: float, what: str,
                     send: Callable[[], None] | None = None,
                     wait: Callable[[], None] | None = None) -> dict:
        """Wait for the reply to ``req_id`` (after ``send()``, if given; with ``wait()``, if
        given, instead of waiting on the event for ``timeout_s``); always unregisters the
        waiter. Raises :class:`RemotePlannerError` on a timeout or an error reply."""
        try:
            if send is not None:
                send()
            if wait is not None:
                wait()
            elif not waiter.event.wait(timeout_s) or waiter.reply is None:
                raise RemotePlannerError("timeout", f"no answer to {what} {req_id} within "
                                                    f"{timeout_s:.2f} s")
        finally:
            with self._cv:
                self._waiters.pop(req_id, None)
        reply = waiter.reply
        if reply["type"] == "error":
            raise RemotePlannerError(str(reply.get("code")), str(reply.get("message")))
        return reply

    def health(self) -> PlannerHealth:
        """``STARTING`` before the first connection; ``DEAD`` while disconnected, when the
        receive thread is gone, when the server says so or when a request has waited more
        than ``dead_after_s``; ``SLOW`` when one has waited (or round trips take) more than
        ``slow_factor`` x the expected latency + 5 ms."""
        if not self._connected.is_set():
            return PlannerHealth.DEAD if self._ever_connected else PlannerHealth.STARTING
        if self._threads and not all(t.is_alive() for t in self._threads):
            return PlannerHealth.DEAD
        if self.server_state in (PlannerHealth.DEAD.value, PlannerHealth.STARTING.value):
            return PlannerHealth(self.server_state)
        slow_s = self.config.health.slow_factor * self.info.expected_latency_s + 0.005
        with self._cv:
            oldest = min((s.sent for s in self._sent.values()), default=None)
        if oldest is not None:
            waiting = time.monotonic() - oldest
            if waiting > self.config.health.dead_after_s:
                return PlannerHealth.DEAD
            if waiting > max(slow_s, self.config.deadline_s):
                return PlannerHealth.SLOW
        if self._rtts:
            p50 = float(np.median(np.asarray(self._rtts)))
            if p50 > self.config.health.slow_factor * self.info.expected_latency_s + 0.005:
                return PlannerHealth.SLOW
        return PlannerHealth.OK

    def query_health(self, timeout_s: float = 2.0) -> dict[str, Any]:
        """Ask the server for its health and metrics (blocking); returns the reply map."""
        waiter = _Waiter(threading.Event())
        req_id = next(self._ids)
        with self._cv:
            self._waiters[req_id] = waiter

        def wait() -> None:
            end = time.monotonic() + timeout_s
            while not waiter.event.wait(0.05):
                if self._conn_error is not None:  # refused before the waiter existed
                    waiter.reply = self._conn_error
                    break
                if time.monotonic() > end:
                    raise RemotePlannerError("timeout", f"no health reply within {timeout_s} s")

        reply = self._await_reply(req_id, waiter, timeout_s, "health", wait=wait, send=lambda:
                                  self._send_now({"v": BASE_VERSION, "type": "health",
                                                  "id": req_id}))
        state = reply.get("state")
        self.server_state = state if state in {h.value for h in PlannerHealth} else "dead"
        return reply

    def metrics(self) -> dict[str, Any]:
        """Client counters (sent, received, late, errors by code...) and round-trip ms."""
        with self._cv:
            out: dict[str, Any] = dict(self._counts)
            rtts = np.asarray(self._rtts, dtype=np.float64) * 1e3
        if rtts.size:
            out.update(rtt_p50_ms=float(np.percentile(rtts, 50)),
                       rtt_p99_ms=float(np.percentile(rtts, 99)))
        return out
