"""``DirectPlanner``: a thread-free, blocking connection to a planner service, for batch
callers such as training (``edgerl train --planner remote:HOST:PORT``).

:class:`~edgerl.runtime.planners.remote.RemotePlanner` is built for robots: its I/O threads
keep ``request()``/``latest()`` from ever waiting. A training step instead *waits* for its
chunks, and every thread hand-off costs a scheduler wake-up (milliseconds on a busy machine).
``DirectPlanner`` sends its requests and reads the answers on the calling thread itself: one
wake-up per round trip on this side. Same wire protocol, same authentication, same reply
validation (ids, shapes, finite values); a lost connection is reopened and the unanswered
pieces are sent again (``reconnects`` times at most).
"""

from __future__ import annotations

import itertools
import logging
import socket
import time
from collections import Counter
from typing import Any

import numpy as np

from edgerl.planner import PlannerInfo
from edgerl.runtime.planners.remote_config import RemotePlannerError
from edgerl.runtime.planners.wire import (
    DEFAULT_MAX_FRAME,
    PRIORITIES,
    PROTOCOL_VERSION,
    TAG_SIZE,
    WireError,
    decode_array,
    decode_payload,
    encode_array,
    encode_frame,
    recv_frame,
)
from edgerl.runtime.planners.wire_auth import FrameAuth

__all__ = ["DirectPlanner"]

log = logging.getLogger(__name__)

_RETRY_CODES = ("quota_exceeded", "overloaded")


class DirectPlanner:
    """Blocking ``plan_batch`` calls on the caller's thread.

    Args:
        host, port: The planner service.
        secret: Shared secret of an authenticated service.
        timeout_s: Longest wait for one :meth:`plan_many` (and for connecting).
        priority: ``training`` (default) or ``robot``.
        reconnects: Connection losses tolerated per :meth:`plan_many`.
    """

    def __init__(self, host: str, port: int, *, secret: bytes | None = None,
                 timeout_s: float = 30.0, priority: str = "training", reconnects: int = 3,
                 max_frame: int = DEFAULT_MAX_FRAME) -> None:
        if priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {PRIORITIES}, got {priority!r}")
        self.host, self.port = host, port
        self.secret = secret
        self.timeout_s = timeout_s
        self.priority = priority
        self.reconnects = reconnects
        self.max_frame = max_frame
        self.info: PlannerInfo | None = None
        self._sock: socket.socket | None = None
        self._auth: FrameAuth | None = None
        self._ids = itertools.count(1)
        self._counts: Counter[str] = Counter()

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
        self._sock, self._auth = sock, None
        try:
            if self.secret is not None:
                hello = self._recv(time.monotonic() + self.timeout_s, raw=True)
                nonce = hello.get("nonce")
                if hello.get("type") != "hello" or not isinstance(nonce, bytes):
                    raise RemotePlannerError("unauthorized", "the server sent no "
                                                             "authentication hello")
                self._auth = FrameAuth(self.secret, nonce, side="client")
            req_id = next(self._ids)
            self._send({"type": "health", "id": req_id})
            reply = self._recv(time.monotonic() + self.timeout_s)
            if reply.get("type") == "hello":
                raise RemotePlannerError("unauthorized", "the server requires a shared secret")
            if reply.get("type") == "error":
                raise RemotePlannerError(str(reply.get("code")), str(reply.get("message")))
            info = reply.get("info") or {}
            self.info = PlannerInfo(**{k: info[k] for k in (
                "horizon", "action_dim", "dt_s", "period_s", "expected_latency_s")})
        except (KeyError, TypeError) as exc:
            self.close()
            raise RemotePlannerError("malformed", f"the server's health reply has no valid "
                                                  f"info ({exc!r})") from exc
        except BaseException:
            self.close()
            raise
        return self

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
        payload = {"v": PROTOCOL_VERSION, **payload}
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
            except WireError as exc:
                raise RemotePlannerError("unauthorized", exc.message) from exc
        return decode_payload(body, max_frame=self.max_frame)

    # --- planning --------------------------------------------------------------------------
    def plan_many(self, pieces: list[np.ndarray], now: float = 0.0, timeout_s: float | None = None,
                  instructions: list[list[str]] | None = None) -> list[np.ndarray]:
        """One ``plan_batch`` per piece (``obs (n_i, O)``), all in flight at once ->
        ``[(n_i, H, A) float32, ...]``. Pieces refused for the server's quotas are sent
        again after a short pause; other errors raise :class:`RemotePlannerError`."""
        if self._sock is None or self.info is None:
            self.connect()
        texts = instructions or [[""] * len(p) for p in pieces]
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        results: list[np.ndarray | None] = [None] * len(pieces)
        todo = list(range(len(pieces)))
        pause, losses = 0.002, 0
        while todo:
            try:
                todo = self._round(pieces, texts, now, todo, results, deadline)
            except (OSError, ConnectionError) as exc:
                losses += 1
                if losses > self.reconnects:
                    raise RemotePlannerError("disconnected", str(exc)) from exc
                log.warning("planner service connection lost (%s); reconnecting", exc)
                self._counts["reconnects"] += 1
                self.connect()
                todo = [i for i, r in enumerate(results) if r is None]
                continue
            if todo:
                if time.monotonic() + pause > deadline:
                    raise RemotePlannerError("quota_exceeded", "the server kept refusing "
                                                               f"{len(todo)} pieces")
                self._counts["batch_retries"] += len(todo)
                time.sleep(pause)
                pause = min(0.05, 2 * pause)
        self._counts["batches"] += len(pieces)
        return results  # type: ignore[return-value]

    def _round(self, pieces: list[np.ndarray], texts: list[list[str]], now: float,
               todo: list[int], results: list[np.ndarray | None], deadline: float
               ) -> list[int]:
        """Send the pieces in ``todo``, read their answers; returns the refused ones."""
        waiting: dict[int, int] = {}
        for i in todo:
            req_id = next(self._ids)
            waiting[req_id] = i
            self._send({"type": "plan_batch", "id": req_id, "obs": encode_array(
                np.ascontiguousarray(pieces[i], np.float32)), "instructions": texts[i],
                "obs_time": float(now), "deadline_s": 0.0, "priority": self.priority})
        refused = []
        while waiting:
            reply = self._recv(deadline)
            i = waiting.pop(reply.get("id"), None) if type(reply.get("id")) is int else None
            if i is None:
                self._counts["rejected"] += 1
                if reply.get("type") == "error" and reply.get("id") == -1:
                    raise RemotePlannerError(str(reply.get("code")), str(reply.get("message")))
                continue
            if reply.get("type") == "error":
                if reply.get("code") in _RETRY_CODES:
                    refused.append(i)
                    continue
                raise RemotePlannerError(str(reply.get("code")), str(reply.get("message")))
            results[i] = self._validated(reply, len(pieces[i]))
        return refused

    def _validated(self, reply: dict[str, Any], rows: int) -> np.ndarray:
        assert self.info is not None
        if reply.get("type") != "chunk_batch":
            raise RemotePlannerError("malformed", f"expected chunk_batch, got "
                                                  f"{str(reply.get('type'))[:40]!r}")
        try:
            actions = decode_array(reply.get("actions"), "actions", ndim=3)
        except WireError as exc:
            raise RemotePlannerError("malformed", exc.message) from exc
        expected = (rows, self.info.horizon, self.info.action_dim)
        if actions.shape != expected or not np.all(np.isfinite(actions)):
            raise RemotePlannerError("malformed", f"actions {actions.shape} (expected "
                                                  f"{expected}, finite)")
        return actions.astype(np.float32)
