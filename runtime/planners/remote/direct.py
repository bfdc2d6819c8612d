"""``DirectPlanner``: a thread-free, blocking connection to a planner service, for batch
callers such as training (``edgerl train --planner remote:HOST:PORT``).

:class:`~edgerl.runtime.planners.remote.planner.RemotePlanner` is built for robots: its I/O threads
keep ``request()``/``latest()`` from ever waiting. A training step instead *waits* for its
chunks, and every thread hand-off costs a scheduler wake-up (milliseconds on a busy machine).
``DirectPlanner`` sends its requests and reads the answers on the calling thread itself: one
wake-up per round trip on this side. :meth:`DirectPlanner.send_many` /
:meth:`DirectPlanner.receive` split a call in two, still thread-free: the requests go out
at once and the answers wait in the socket until the caller reads them (training sends a
query, simulates the ``D`` steps of its delay, then reads the chunks). Same network protocol
(version negotiated from the server's health reply; a version 2 server's planner intents are
kept in :attr:`BatchTicket.intents`), same authentication, same reply validation (ids,
shapes, finite values); a lost connection is reopened and every unanswered piece is sent
again (``reconnects`` times at most).
"""

from __future__ import annotations

import itertools
import logging
import select
import socket
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgerl.contract.planner import PlannerInfo
from edgerl.runtime.planners.protocol.auth import (
    FrameAuth,
    check_key_id,
    check_welcome,
    client_hello,
)
from edgerl.runtime.planners.protocol.framing import (
    BASE_VERSION,
    DEFAULT_MAX_FRAME,
    PRIORITIES,
    TAG_SIZE,
    ProtocolError,
    decode_array,
    decode_payload,
    encode_array,
    encode_frame,
    recv_frame,
)
from edgerl.runtime.planners.protocol.messages import batch_intent_from_msg, negotiated_version
from edgerl.runtime.planners.remote.config import RemotePlannerError

__all__ = ["BatchTicket", "DirectPlanner"]

log = logging.getLogger(__name__)

_RETRY_CODES = ("quota_exceeded", "overloaded")


def _refusal(body: bytes, exc: ProtocolError) -> RemotePlannerError:
    """The error for a reply whose tag fails: the server's own untagged ``unknown_key``
    refusal keeps its code and message; anything else is ``unauthorized``."""
    try:
        msg = decode_payload(body)
    except ProtocolError:
        return RemotePlannerError("unauthorized", exc.message)
    if msg.get("type") == "error" and msg.get("code") == "unknown_key":
        return RemotePlannerError("unknown_key", str(msg.get("message")))
    return RemotePlannerError("unauthorized", exc.message)


@dataclass(eq=False)
class BatchTicket:
    """The pieces of one :meth:`DirectPlanner.send_many` and their answers so far."""

    pieces: list[np.ndarray]  # obs (n_i, O) float32
    texts: list[list[str]]
    now: float
    deadline: float  # client monotonic seconds
    results: list[np.ndarray | None] = field(default_factory=list)  # (n_i, H, A) or None
    #: Each answered piece's planner intent ``(n_i, I)`` (``None``: the server sent none).
    intents: list[np.ndarray | None] = field(default_factory=list)
    waiting: set[int] = field(default_factory=set)  # pieces sent, not yet answered
    refused: list[int] = field(default_factory=list)  # pieces to send again (quota)
    retry_at: float = 0.0  # client monotonic seconds: send the refused pieces again then
    pause: float = 0.002  # the next back-off (s)
    error: Exception | None = None

    def __post_init__(self) -> None:
        self.results = [None] * len(self.pieces)
        self.intents = [None] * len(self.pieces)

    @property
    def done(self) -> bool:
        """Every piece answered."""
        return all(r is not None for r in self.results)


class DirectPlanner:
    """Blocking ``plan_batch`` calls on the caller's thread.

    Args:
        host, port: The planner service.
        secret: Shared secret of an authenticated service, or the secret of ``key_id``.
        key_id: This client's named key on a service with several (sent in the clear in the
            client's hello; an unknown one is refused with ``unknown_key``); ``None``: the
            shared secret.
        timeout_s: Longest wait for one :meth:`plan_many` (and for connecting).
        priority: ``training`` (default) or ``robot`` (a named key may allow ``training``
            only: ``priority_denied``).
        reconnects: Connection losses tolerated per :meth:`plan_many`.
    """

    def __init__(self, host: str, port: int, *, secret: bytes | None = None,
                 timeout_s: float = 30.0, priority: str = "training", reconnects: int = 3,
                 max_frame: int = DEFAULT_MAX_FRAME, key_id: str | None = None) -> None:
        if priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {PRIORITIES}, got {priority!r}")
        if key_id is not None:
            check_key_id(key_id)
            if secret is None:
                raise ValueError(f"key_id {key_id!r} needs that key's secret")
        self.host, self.port = host, port
        self.secret = secret
        self.key_id = key_id
        self.timeout_s = timeout_s
        self.priority = priority
        self.reconnects = reconnects
        self.max_frame = max_frame
        self.info: PlannerInfo | None = None
        self._sock: socket.socket | None = None
        self._auth: FrameAuth | None = None
        self._ids = itertools.count(1)
        self._counts: Counter[str] = Counter()
        self._open: list[BatchTicket] = []  # sent, not yet received
        self._inflight: dict[int, tuple[BatchTicket, int]] = {}  # request id -> piece
        self._lost: OSError | None = None  # a send failed: reconnect in receive()
        #: Protocol version of the plan_batch requests (negotiated in :meth:`connect`).
        self.version = BASE_VERSION

    # --- connection ------------------------------------------------------------------------
    def connect(self) -> DirectPlanner:
        """Open the connection (authenticating if a secret is set) and read the server's
        :class:`PlannerInfo`; raises :class:`RemotePlannerError`."""
        self.close()
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.timeout_s)
        except OSError as exc:
            raise RemotePlannerError("unreachable", f"no planner server at {self.host}:"
                                                    f"{self.port} ({exc})") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock, self._auth, self.version = sock, None, BASE_VERSION
        try:
            if self.secret is not None:
                hello = self._recv(time.monotonic() + self.timeout_s, raw=True)
                nonce = hello.get("nonce")
                if hello.get("type") != "hello" or not isinstance(nonce, bytes):
                    raise RemotePlannerError("unauthorized", "the server sent no "
                                                             "authentication hello")
                self._auth = FrameAuth(self.secret, nonce, side="client")
                if self.key_id is not None:
                    self._send(client_hello(self.key_id))
                    self._welcome(self._recv(time.monotonic() + self.timeout_s))
            req_id = next(self._ids)
            self._send({"type": "health", "id": req_id})
            reply = self._recv(time.monotonic() + self.timeout_s)
            if reply.get("type") == "hello":
                raise RemotePlannerError("unauthorized", "the server requires a shared secret")
            if reply.get("type") == "error":
                raise RemotePlannerError(str(reply.get("code")), str(reply.get("message")))
            info = reply.get("info") or {}
            self.info = PlannerInfo(**{k: info[k] for k in (
                "horizon", "action_dim", "dt_s", "period_s", "expected_latency_s")},
                intent_dim=int(info.get("intent_dim", 0)))
            self.version = negotiated_version(reply)
        except (KeyError, TypeError) as exc:
            self.close()
            raise RemotePlannerError("malformed", f"the server's health reply has no valid "
                                                  f"info ({exc!r})") from exc
        except BaseException:
            self.close()
            raise
        return self

    def _welcome(self, msg: dict[str, Any]) -> None:
        """Check the server's answer to our hello (its ``welcome``; an error reply raises with
        its code)."""
        assert self.key_id is not None
        try:
            allowed = check_welcome(msg, self.key_id)
        except ProtocolError as exc:
            raise RemotePlannerError(exc.code, exc.message) from exc
        if allowed in PRIORITIES and PRIORITIES.index(self.priority) < PRIORITIES.index(allowed):
            log.warning("key %r may claim priority %r at most; requests at %r will be refused "
                        "(priority_denied)", self.key_id, allowed, self.priority)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def __enter__(self) -> DirectPlanner:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def metrics(self) -> dict[str, int]:
        """Counters: ``batches``, ``batch_retries``, ``reconnects``, ``rejected``..."""
        return dict(self._counts)

    # --- frames ----------------------------------------------------------------------------
    def _send(self, payload: dict[str, Any]) -> None:
        assert self._sock is not None
        payload = {"v": BASE_VERSION, **payload}
        frame = self._auth.seal(payload) if self._auth else encode_frame(payload)
        self._sock.sendall(frame)

    def _recv(self, deadline: float, raw: bool = False) -> dict[str, Any]:
        assert self._sock is not None
        self._sock.settimeout(max(1e-3, deadline - time.monotonic()))
        try:
            body = recv_frame(self._sock, max_frame=self.max_frame + TAG_SIZE)
        except TimeoutError as exc:
            raise RemotePlannerError("timeout", f"no answer from {self.host}:{self.port} "
                                                f"within {self.timeout_s:g} s") from exc
        if body is None:
            raise ConnectionError("the planner server closed the connection")
        if self._auth is not None and not raw:
            try:
                body = self._auth.open(body)
            except ProtocolError as exc:
                raise _refusal(body, exc) from exc
        return decode_payload(body, max_frame=self.max_frame)

    # --- planning --------------------------------------------------------------------------
    def plan_many(self, pieces: list[np.ndarray], now: float = 0.0, timeout_s: float | None = None,
                  instructions: list[list[str]] | None = None) -> list[np.ndarray]:
        """One ``plan_batch`` per piece (``obs (n_i, O)``), all in flight at once ->
        ``[(n_i, H, A) float32, ...]``. Pieces refused for the server's quotas are sent
        again after a short pause; other errors raise :class:`RemotePlannerError`."""
        return self.receive(self.send_many(pieces, now, timeout_s, instructions))

    def send_many(self, pieces: list[np.ndarray], now: float = 0.0,
                  timeout_s: float | None = None,
                  instructions: list[list[str]] | None = None) -> BatchTicket:
        """Send one ``plan_batch`` per piece and return at once: a :class:`BatchTicket` whose
        answers :meth:`receive` reads later. Several tickets may be in flight; each answer is
        filed under its own ticket whichever call reads it (all on the caller's thread)."""
        if self._sock is None or self.info is None:
            self.connect()
        ticket = BatchTicket(
            pieces=[np.array(p, np.float32, order="C") for p in pieces],  # own copies
            texts=instructions or [[""] * len(p) for p in pieces], now=float(now),
            deadline=time.monotonic() + (timeout_s or self.timeout_s))
        self._open.append(ticket)
        try:
            self._send_pieces(ticket, range(len(pieces)))
        except OSError as exc:  # resent after reconnecting, in receive()
            self._lost = exc
        return ticket

    def receive(self, ticket: BatchTicket) -> list[np.ndarray]:
        """Wait for ``ticket``'s answers (reading and filing other tickets' answers as they
        come) -> ``[(n_i, H, A) float32, ...]``; raises :class:`RemotePlannerError`."""
        losses = 0
        while not ticket.done:
            if ticket.error is not None:
                self._forget(ticket)
                raise ticket.error
            try:
                if self._lost is not None:
                    raise self._lost
                if ticket.refused and not ticket.waiting:  # only refusals left: back off
                    if ticket.retry_at > ticket.deadline:
                        self._forget(ticket)
                        raise RemotePlannerError("quota_exceeded", "the server kept refusing "
                                                 f"{len(ticket.refused)} pieces")
                    time.sleep(max(0.0, ticket.retry_at - time.monotonic()))
                    self._retry(ticket)
                    continue
                self._file(self._recv(ticket.deadline))
            except (OSError, ConnectionError) as exc:
                losses += 1
                if losses > self.reconnects:
                    self._forget(ticket)
                    raise RemotePlannerError("disconnected", str(exc)) from exc
                log.warning("planner service connection lost (%s); reconnecting", exc)
                self._counts["reconnects"] += 1
                self._resend_all()
            except RemotePlannerError:
                self._forget(ticket)
                raise
        self._forget(ticket)
        self._counts["batches"] += len(ticket.pieces)
        return ticket.results  # type: ignore[return-value]

    def poll(self) -> None:
        """Without waiting: file every answer that has already arrived and send again the
        refused pieces whose back-off has passed (errors are raised by :meth:`receive`)."""
        try:
            while self._sock is not None and self._lost is None and \
                    select.select([self._sock], [], [], 0)[0]:
                self._file(self._recv(time.monotonic() + self.timeout_s))
            for ticket in list(self._open):
                if ticket.refused and time.monotonic() >= ticket.retry_at:
                    self._retry(ticket)
        except (OSError, ConnectionError) as exc:
            self._lost = exc  # receive() reconnects
        except RemotePlannerError as exc:  # the connection's own error (id -1)
            for ticket in self._open:
                ticket.error = exc

    def _retry(self, ticket: BatchTicket) -> None:
        self._counts["batch_retries"] += len(ticket.refused)
        todo, ticket.refused = ticket.refused, []
        self._send_pieces(ticket, todo)

    def _send_pieces(self, ticket: BatchTicket, todo: Iterable[int]) -> None:
        for i in todo:
            req_id = next(self._ids)
            self._inflight[req_id] = (ticket, i)
            ticket.waiting.add(i)
            self._send({"v": self.version, "type": "plan_batch", "id": req_id,
                        "obs": encode_array(
                ticket.pieces[i]), "instructions": ticket.texts[i], "obs_time": ticket.now,
                "deadline_s": 0.0, "priority": self.priority})

    def _file(self, reply: dict[str, Any]) -> None:
        """File one reply under its ticket (an answer, a refusal to resend, or an error)."""
        req_id = reply.get("id")
        entry = self._inflight.pop(req_id, None) if type(req_id) is int else None
        if entry is None:
            self._counts["rejected"] += 1
            if reply.get("type") == "error" and req_id == -1:
                if reply.get("code") == "shutting_down":  # reconnect, send again
                    raise ConnectionError(f"the planner server is stopping "
                                          f"({str(reply.get('message'))[:80]})")
                raise RemotePlannerError(str(reply.get("code")), str(reply.get("message")))
            return
        ticket, i = entry
        ticket.waiting.discard(i)
        if reply.get("type") == "error":
            if reply.get("code") in _RETRY_CODES:
                if not ticket.refused:  # back off, doubling up to 50 ms
                    ticket.retry_at = time.monotonic() + ticket.pause
                    ticket.pause = min(0.05, 2 * ticket.pause)
                ticket.refused.append(i)
            else:
                ticket.error = RemotePlannerError(str(reply.get("code")),
                                                  str(reply.get("message")))
        else:
            try:
                ticket.results[i], ticket.intents[i] = self._validated(
                    reply, len(ticket.pieces[i]))
            except RemotePlannerError as exc:
                ticket.error = exc
        if (ticket.done or ticket.error is not None) and ticket in self._open:
            self._open.remove(ticket)  # nothing left to send again after a reconnect

    def _resend_all(self) -> None:
        """Reconnect and send every open ticket's unanswered pieces again."""
        self._lost = None
        self._inflight.clear()
        self.connect()
        for ticket in self._open:
            ticket.waiting.clear()
            ticket.refused = []
            self._send_pieces(ticket, [i for i, r in enumerate(ticket.results) if r is None])

    def _forget(self, ticket: BatchTicket) -> None:
        if ticket in self._open:
            self._open.remove(ticket)
        for req_id in [k for k, (t, _) in self._inflight.items() if t is ticket]:
            del self._inflight[req_id]

    def _validated(self, reply: dict[str, Any], rows: int
                   ) -> tuple[np.ndarray, np.ndarray | None]:
        """A ``chunk_batch`` reply's ``(actions (rows, H, A), intent (rows, I) or None)``."""
        assert self.info is not None
        if reply.get("type") != "chunk_batch":
            raise RemotePlannerError("malformed", f"expected chunk_batch, got "
                                                  f"{str(reply.get('type'))[:40]!r}")
        try:
            actions = decode_array(reply.get("actions"), "actions", ndim=3)
            intent = batch_intent_from_msg(reply, rows)
        except ProtocolError as exc:
            raise RemotePlannerError("malformed", exc.message) from exc
        expected = (rows, self.info.horizon, self.info.action_dim)
        if actions.shape != expected or not np.all(np.isfinite(actions)):
            raise RemotePlannerError("malformed", f"actions {actions.shape} (expected "
                                                  f"{expected}, finite)")
        return actions.astype(np.float32), intent
