"""``RemotePlanner``: the client side of planner serving (see :mod:`planner_wire`).

Implements :class:`edgerl.planner.Planner` for a planner running in another process or on
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

With ``secret`` set, the client expects the server's ``hello`` and tags every frame
(:class:`~edgerl.runtime.planner_wire.FrameAuth`); a server that asks for authentication
from a client without the secret is reported as ``unauthorized``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import random
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.chunk import ActionChunk
from edgerl.planner import PlannerHealth, PlannerInfo
from edgerl.runtime.planner_wire import (
    DEFAULT_MAX_FRAME,
    PRIORITIES,
    PROTOCOL_VERSION,
    TAG_SIZE,
    FrameAuth,
    WireError,
    chunk_from_msg,
    decode_array,
    decode_payload,
    encode_array,
    encode_frame,
    recv_frame,
)
from edgerl.serde import from_dict, to_dict
from edgerl.spec import LatencyModel

__all__ = [
    "RemotePlanner",
    "RemotePlannerConfig",
    "RemotePlannerError",
    "delay_distribution",
    "latency_model_from_samples",
    "load_latency_model",
    "save_latency_model",
]

log = logging.getLogger(__name__)


class RemotePlannerError(RuntimeError):
    """The server answered with an error, or could not be reached; ``code`` names it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


@dataclass
class RemotePlannerConfig:
    """Client settings.

    Attributes:
        host: Server address.
        port: Server TCP port.
        deadline_s: Budget per request (s) from the server's receipt; 0 = none. A chunk
            arriving later than ``deadline_s`` after ``request()`` is dropped too.
        connect_timeout_s: How long :meth:`RemotePlanner.start` waits for the server.
        reconnect_s: Pause between reconnection attempts after a disconnect.
        slow_factor: ``health()`` is ``SLOW`` when the round-trip p50 exceeds
            ``slow_factor * info.expected_latency_s`` (and some milliseconds).
        max_frame: Largest accepted reply payload (bytes).
        reconnect_max_s: Longest pause between reconnection attempts (the pause doubles
            from ``reconnect_s`` after each failure).
        dead_after_s: ``health()`` is ``DEAD`` when a sent request has had no answer for
            this long (the server is connected but not answering).
        max_future_s: A chunk whose ``t0`` is more than this after its ``obs_time`` is
            rejected.
        secret: Shared secret of an authenticated server (``--secret-file``), or ``None``.
        priority: ``robot`` (default) or ``training``: the server serves robots first.
    """

    host: str = "127.0.0.1"
    port: int = 7700
    deadline_s: float = 0.0
    connect_timeout_s: float = 5.0
    reconnect_s: float = 0.5
    slow_factor: float = 2.0
    max_frame: int = DEFAULT_MAX_FRAME
    reconnect_max_s: float = 5.0
    dead_after_s: float = 5.0
    max_future_s: float = 1.0
    secret: bytes | None = None
    priority: str = "robot"

    def __post_init__(self) -> None:
        if self.priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {PRIORITIES}, got {self.priority!r}")
        for name in ("connect_timeout_s", "reconnect_s", "reconnect_max_s", "dead_after_s",
                     "max_future_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.deadline_s < 0:
            raise ValueError(f"deadline_s must be >= 0, got {self.deadline_s}")


@dataclass
class _Waiter:
    event: threading.Event
    reply: dict[str, Any] | None = None


@dataclass
class _Outgoing:
    req_id: int
    payload: dict[str, Any]
    created: float  # client monotonic seconds
    deadline_s: float
    obs_time: float = math.nan


@dataclass
class _Sent:
    """A request on the wire, waiting for its answer."""

    created: float  # client monotonic seconds of request()
    deadline_s: float
    obs_time: float  # as sent (the reply must echo it)
    sent: float  # client monotonic seconds when it went out


class RemotePlanner:
    """A :class:`~edgerl.planner.Planner` whose model runs behind a planner server."""

    def __init__(self, config: RemotePlannerConfig | None = None, **overrides: Any) -> None:
        cfg = config or RemotePlannerConfig()
        if overrides:
            cfg = RemotePlannerConfig(**{**cfg.__dict__, **overrides})
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
        self._backoff = cfg.reconnect_s
        self._info_known = False  # info comes from the server's health reply in start()
        self._waiters: dict[int, _Waiter] = {}
        self._latest: ActionChunk | None = None
        self._rtts: deque[float] = deque(maxlen=1000)
        self._counts: Counter[str] = Counter()
        self._threads: list[threading.Thread] = []
        self._conn_error: dict[str, Any] | None = None  # last connection-level error reply

    # --- life cycle ------------------------------------------------------------------------
    def start(self) -> RemotePlanner:
        """Connect, fetch the server's :class:`PlannerInfo`, start the I/O threads.

        Raises :class:`RemotePlannerError` (``unreachable``) when no server answers within
        ``connect_timeout_s``.
        """
        deadline = time.monotonic() + self.config.connect_timeout_s
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
                "horizon", "action_dim", "dt_s", "period_s", "expected_latency_s")})
            self._info_known = True
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
                                        timeout=self.config.connect_timeout_s)
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
        """Read the authenticated server's ``hello`` (within ``connect_timeout_s``)."""
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
        return FrameAuth(self.config.secret, nonce, side="client")

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
        payload = {"v": PROTOCOL_VERSION, "type": "plan", "id": req_id,
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
                     send: Callable[[], None] | None = None) -> dict:
        """Wait for the reply to ``req_id`` (after ``send()``, if given); always unregisters
        the waiter. Raises :class:`RemotePlannerError` on a timeout or an error reply."""
        try:
            if send is not None:
                send()
            if not waiter.event.wait(timeout_s) or waiter.reply is None:
                raise RemotePlannerError("timeout", f"no answer to {what} {req_id} within "
                                                    f"{timeout_s:.2f} s")
        finally:
            with self._cv:
                self._waiters.pop(req_id, None)
        reply = waiter.reply
        if reply["type"] == "error":
            raise RemotePlannerError(str(reply.get("code")), str(reply.get("message")))
        return reply

    def plan_batch(self, observations: np.ndarray, instructions: list[str], now: float,
                   timeout_s: float = 30.0) -> np.ndarray:
        """Blocking batched round trip: ``obs (n, O)`` + n instructions -> ``(n, H, A)``
        float32, every chunk starting at ``now`` (a training-time planner service answering
        all simulated envs in one request). The server's planner must have ``plan_batch``."""
        obs = np.ascontiguousarray(observations, dtype=np.float32)
        if obs.ndim != 2 or obs.shape[0] != len(instructions):
            raise ValueError(f"need obs (n, O) and n instructions, got obs {obs.shape} and "
                             f"{len(instructions)} instructions")
        return self.plan_many([obs], now, timeout_s, [list(instructions)])[0]

    def plan_many(self, pieces: list[np.ndarray], now: float, timeout_s: float = 30.0,
                  instructions: list[list[str]] | None = None) -> list[np.ndarray]:
        """Send one ``plan_batch`` per piece (``obs (n_i, O)``) at once, wait for all;
        returns ``[(n_i, H, A) float32, ...]``. A piece refused for the server's quotas
        (``quota_exceeded``, ``overloaded``) is sent again after a short pause until
        ``timeout_s``; any other error raises :class:`RemotePlannerError`."""
        texts = instructions or [[""] * len(p) for p in pieces]
        end = time.monotonic() + timeout_s
        results: list[np.ndarray | None] = [None] * len(pieces)
        todo = list(range(len(pieces)))
        pause = 0.002
        while todo:
            waiting = [(i, *self._send_batch(pieces[i], texts[i], now)) for i in todo]
            todo = []
            for i, req_id, waiter in waiting:
                try:
                    reply = self._await_reply(req_id, waiter, max(0.0, end - time.monotonic()),
                                              "batch")
                    actions = reply["_actions"]
                    if actions.shape[0] != len(pieces[i]):
                        raise RemotePlannerError("malformed", f"{actions.shape[0]} chunks for "
                                                              f"{len(pieces[i])} observations")
                    results[i] = actions
                except RemotePlannerError as exc:
                    if exc.code not in ("quota_exceeded", "overloaded") or \
                            time.monotonic() + pause > end:
                        raise
                    todo.append(i)
            if todo:
                self._counts["batch_retries"] += len(todo)
                time.sleep(pause)
                pause = min(0.05, 2 * pause)
        return results  # type: ignore[return-value]

    def _send_batch(self, obs: np.ndarray, texts: list[str], now: float
                    ) -> tuple[int, _Waiter]:
        obs = np.ascontiguousarray(obs, dtype=np.float32)
        waiter = _Waiter(threading.Event())
        req_id = next(self._ids)
        with self._cv:
            self._waiters[req_id] = waiter
            self._sent[req_id] = _Sent(time.monotonic(), 0.0, float(now), time.monotonic())
        message = {"v": PROTOCOL_VERSION, "type": "plan_batch", "id": req_id,
                   "obs": encode_array(obs), "instructions": list(texts),
                   "obs_time": float(now), "deadline_s": self.config.deadline_s,
                   "priority": "training" if self.config.priority == "robot"
                   else self.config.priority}
        try:
            self._send_now(message)
        except RemotePlannerError as exc:
            waiter.reply = {"type": "error", "code": exc.code, "message": str(exc)}
            waiter.event.set()
        return req_id, waiter

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
        slow_s = self.config.slow_factor * self.info.expected_latency_s + 0.005
        with self._cv:
            oldest = min((s.sent for s in self._sent.values()), default=None)
        if oldest is not None:
            waiting = time.monotonic() - oldest
            if waiting > self.config.dead_after_s:
                return PlannerHealth.DEAD
            if waiting > max(slow_s, self.config.deadline_s):
                return PlannerHealth.SLOW
        if self._rtts:
            p50 = float(np.median(np.asarray(self._rtts)))
            if p50 > self.config.slow_factor * self.info.expected_latency_s + 0.005:
                return PlannerHealth.SLOW
        return PlannerHealth.OK

    def query_health(self, timeout_s: float = 2.0) -> dict[str, Any]:
        """Ask the server for its health and metrics (blocking); returns the reply map."""
        waiter = _Waiter(threading.Event())
        req_id = next(self._ids)
        with self._cv:
            self._waiters[req_id] = waiter
        try:
            self._send_now({"v": PROTOCOL_VERSION, "type": "health", "id": req_id})
            end = time.monotonic() + timeout_s
            while not waiter.event.wait(0.05):
                if self._conn_error is not None:  # refused before the waiter existed
                    waiter.reply = self._conn_error
                    break
                if time.monotonic() > end:
                    raise RemotePlannerError("timeout", f"no health reply within {timeout_s} s")
        finally:
            with self._cv:
                self._waiters.pop(req_id, None)
        reply = waiter.reply
        if reply["type"] == "error":
            raise RemotePlannerError(str(reply.get("code")), str(reply.get("message")))
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

    # --- I/O threads -----------------------------------------------------------------------
    def _send_now(self, payload: dict[str, Any]) -> None:
        sock = self._sock
        if sock is None or not self._connected.is_set():
            raise RemotePlannerError("disconnected", "not connected to the planner server")
        try:
            with self._send_lock:  # serialise writers; never held by request()/latest()
                auth = self._auth
                sock.sendall(auth.seal(payload) if auth is not None else encode_frame(payload))
        except OSError as exc:
            raise RemotePlannerError("disconnected", str(exc)) from exc

    def _send_loop(self) -> None:
        while not self._closing.is_set():
            with self._cv:
                while self._outbox is None and not self._closing.is_set():
                    self._cv.wait(0.5)
                if self._closing.is_set():
                    return
                item, self._outbox = self._outbox, None
            if not self._connected.wait(self.config.reconnect_s):
                self._counts["dropped_disconnected"] += 1
                continue
            waited = time.monotonic() - item.created
            if item.deadline_s > 0:
                if waited >= item.deadline_s:
                    self._counts["expired_unsent"] += 1
                    continue
                item.payload["deadline_s"] = item.deadline_s - waited
            with self._cv:
                self._sent[item.req_id] = _Sent(item.created, item.deadline_s, item.obs_time,
                                                time.monotonic())
                if len(self._sent) > 1000:  # answers that never came
                    self._sent.pop(next(iter(self._sent)))
            try:
                self._send_now(item.payload)
                self._counts["sent"] += 1
            except RemotePlannerError as exc:
                self._counts["send_failed"] += 1
                log.debug("send failed: %s", exc)

    def _recv_loop(self) -> None:
        """Receive and dispatch replies; survives anything the server sends."""
        while not self._closing.is_set():
            sock = self._sock
            if sock is None or not self._connected.is_set():
                self._reconnect()
                continue
            try:
                body = recv_frame(sock, max_frame=self.config.max_frame + TAG_SIZE)
                if body is None:
                    raise ConnectionError("server closed the connection")
                auth = self._auth
                if auth is not None:
                    body = self._open(auth, body)
                self._dispatch(decode_payload(body, max_frame=self.config.max_frame))
            except WireError as exc:
                self._counts["bad_replies"] += 1
                log.warning("bad reply from the planner server: %s", exc)
                if exc.code in ("frame_too_large", "unauthorized"):  # stream unusable
                    self._drop_connection()
            except (OSError, ConnectionError) as exc:
                if not self._closing.is_set():
                    log.warning("planner server connection lost: %s", exc)
                self._drop_connection()
            except Exception as exc:  # a reply we failed to handle must not end the thread
                self._counts["bad_replies"] += 1
                log.warning("unhandled reply from the planner server: %s: %s",
                            type(exc).__name__, exc)

    def _open(self, auth: FrameAuth, body: bytes) -> bytes:
        """Check a reply's tag. A server refusing our tag answers with an untagged
        ``unauthorized`` error: report it to every waiter, then the connection is dropped."""
        try:
            return auth.open(body)
        except WireError as exc:
            try:
                msg = decode_payload(body)
                why = f"the server refused our frames: {msg.get('message')}"
            except WireError:
                why = f"a reply failed authentication ({exc.message}); is the secret right?"
            refusal = {"type": "error", "code": "unauthorized", "message": why}
            with self._cv:
                self._conn_error = refusal
            self._wake_all(refusal)
            raise WireError("unauthorized", why) from exc

    def _reconnect(self) -> None:
        """One attempt after a pause that doubles (with +-20 % jitter) up to
        ``reconnect_max_s`` while attempts fail."""
        pause = self._backoff * random.uniform(0.8, 1.2)
        if self._closing.wait(pause):
            return
        try:
            self._connect()
            self._counts["reconnects"] += 1
            self._backoff = self.config.reconnect_s
        except (OSError, WireError, RemotePlannerError) as exc:
            self._counts["reconnect_failed"] += 1
            self._backoff = min(self.config.reconnect_max_s, 2 * self._backoff)
            log.debug("reconnect to %s:%d failed: %s (next in %.2f s)", self.config.host,
                      self.config.port, exc, self._backoff)

    def _reject(self, reason: str, message: str, waiter: _Waiter | None) -> None:
        self._counts[f"rejected_{reason}"] += 1
        log.warning("rejected a reply from the planner server: %s: %s", reason, message)
        if waiter is not None:
            waiter.reply = {"type": "error", "code": "malformed",
                            "message": f"{reason}: {message}"}
            waiter.event.set()

    def _dispatch(self, msg: dict[str, Any]) -> None:
        kind, req_id = msg["type"], msg.get("id", -1)
        if type(req_id) is not int:
            self._reject("bad_id", f"reply id {str(req_id)[:40]!r} is not an integer", None)
            return
        now = time.monotonic()
        with self._cv:
            sent = self._sent.pop(req_id, None) if kind != "health" else None
            waiter = self._waiters.get(req_id)
        if kind == "hello":
            with self._cv:
                self._conn_error = {"type": "error", "code": "unauthorized",
                                    "message": "the server requires a shared secret (set "
                                               "RemotePlannerConfig.secret)"}
            self._wake_all(self._conn_error)
            return
        if kind == "health":
            if waiter is not None:
                waiter.reply = msg
                waiter.event.set()
            return
        if kind == "error" and req_id == -1:  # about the connection (e.g. overloaded)
            self._counts[f"error_{msg.get('code', '?')}"] += 1
            log.warning("planner server: %s: %s", msg.get("code"), msg.get("message"))
            with self._cv:
                first = self._conn_error
                if first is None or first.get("code") != "unauthorized":  # keep the cause
                    self._conn_error = msg
            self._wake_all(self._conn_error)
            return
        if kind == "error":
            self._counts[f"error_{msg.get('code', '?')}"] += 1
            if msg.get("code") not in ("superseded", "deadline_exceeded", "deadline_unmeetable",
                                       "quota_exceeded"):
                log.warning("planner server error for request %s: %s: %s", req_id,
                            msg.get("code"), msg.get("message"))
            if waiter is not None:
                waiter.reply = msg
                waiter.event.set()
            return
        if kind not in ("chunk", "chunk_batch"):
            self._reject("unknown_type", f"reply type {str(kind)[:40]!r}", waiter)
            return
        if sent is None:
            self._reject("unsolicited", f"{kind} for request {req_id}, which is not waiting "
                                        "for an answer on this connection", waiter)
            return
        if kind == "chunk_batch":
            self._accept_batch(msg, sent, waiter)
            return
        self._rtts.append(now - sent.created)
        if sent.deadline_s > 0 and now - sent.created > sent.deadline_s:
            self._counts["late"] += 1
            if waiter is not None:
                waiter.reply = {"type": "error", "code": "deadline_exceeded",
                                "message": f"answer arrived {1e3 * (now - sent.created):.1f} "
                                           "ms after the request"}
                waiter.event.set()
            return
        try:
            chunk = self._validated_chunk(msg, sent)
        except WireError as exc:
            self._reject(exc.code, exc.message, waiter)
            return
        self._counts["received"] += 1
        current = self._latest
        if current is None or chunk.obs_time >= current.obs_time:
            self._latest = chunk
        if waiter is not None:
            waiter.reply = msg
            waiter.event.set()

    def _validated_chunk(self, msg: dict[str, Any], sent: _Sent) -> ActionChunk:
        """The reply's chunk, or :class:`WireError` naming what is wrong with it."""
        chunk = chunk_from_msg(msg)
        if chunk.obs_time != sent.obs_time:
            raise WireError("obs_time", f"reply obs_time {chunk.obs_time!r} is not the "
                                        f"request's {sent.obs_time!r}")
        ahead = chunk.t0 - chunk.obs_time
        if not -chunk.horizon_s <= ahead <= self.config.max_future_s:
            raise WireError("t0", f"chunk t0 is {ahead:.3g} s after its obs_time (allowed: "
                                  f"-{chunk.horizon_s:.3g}..{self.config.max_future_s:g} s)")
        expected = (self.info.horizon, self.info.action_dim)
        if self._info_known and chunk.actions.shape != expected:
            raise WireError("shape", f"actions {chunk.actions.shape}, expected {expected}")
        if not np.all(np.isfinite(chunk.actions)):
            raise WireError("non_finite", "actions contain NaN or inf")
        return chunk

    def _accept_batch(self, msg: dict[str, Any], sent: _Sent, waiter: _Waiter | None) -> None:
        self._counts["received_batches"] += 1
        try:
            actions = decode_array(msg.get("actions"), "actions", ndim=3).astype(np.float32)
            if not np.all(np.isfinite(actions)):
                raise WireError("non_finite", "actions contain NaN or inf")
            if self._info_known and actions.shape[1:] != (self.info.horizon,
                                                          self.info.action_dim):
                raise WireError("shape", f"actions {actions.shape}, expected (n, "
                                         f"{self.info.horizon}, {self.info.action_dim})")
        except WireError as exc:
            self._reject(exc.code, exc.message, waiter)
            return
        if waiter is not None:
            waiter.reply = {**msg, "_actions": actions}
            waiter.event.set()

    def _wake_all(self, reply: dict[str, Any]) -> None:
        with self._cv:
            waiters = list(self._waiters.values())
        for w in waiters:
            w.reply = reply
            w.event.set()


# --- fitting the simulator's delay model from measured latency --------------------------------
def delay_distribution(latencies_s: np.ndarray, control_dt: float) -> list[float]:
    """Probabilities over planner delays ``D = 0, 1, 2...`` control steps.

    A chunk whose observation was taken at tick ``k`` and which arrives ``L`` seconds later is
    first usable at tick ``k + ceil(L / control_dt)``, so ``D = ceil(L / dt)`` (``L = 0`` only
    for a planner that answers instantly). This is the convention of the sim wrappers'
    ``LatencyModel.delay_distribution``.
    """
    lat = np.asarray(latencies_s, dtype=np.float64).reshape(-1)
    if lat.size == 0 or not np.all(np.isfinite(lat)) or np.any(lat < 0):
        raise ValueError("need at least one finite, non-negative latency sample")
    if not control_dt > 0:
        raise ValueError(f"control_dt must be > 0, got {control_dt}")
    steps = np.ceil(lat / control_dt - 1e-9).astype(np.int64)
    counts = np.bincount(steps)
    probs = counts / counts.sum()
    probs[-1] += 1.0 - probs.sum()  # exact sum despite float rounding
    return [float(p) for p in probs]


def latency_model_from_samples(latencies_s: np.ndarray, control_dt: float,
                               period_steps: int) -> LatencyModel:
    """A :class:`~edgerl.spec.LatencyModel` with the measured delay distribution; its
    ``planner_delay_steps`` is the median delay (used where a fixed D is needed)."""
    probs = delay_distribution(latencies_s, control_dt)
    median = int(np.searchsorted(np.cumsum(probs), 0.5))
    return LatencyModel(planner_delay_steps=median, planner_period_steps=max(1, period_steps),
                        delay_distribution=probs)


def save_latency_model(model: LatencyModel, path: str | Path) -> Path:
    """Write ``model`` as JSON (the ``latency`` object of a manifest)."""
    path = Path(path)
    path.write_text(json.dumps(to_dict(model), indent=2) + "\n")
    return path


def load_latency_model(path: str | Path) -> LatencyModel:
    """Read a file written by :func:`save_latency_model` (or ``edgerl bench planner
    --write-latency-model``); raises ``SchemaError`` naming a bad field."""
    return from_dict(LatencyModel, json.loads(Path(path).read_text()), "latency")
