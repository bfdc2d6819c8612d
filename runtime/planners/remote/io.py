"""The I/O threads of :class:`~.remote.RemotePlanner`: sending, receiving, validating replies.

The sender ships the newest queued observation; the receiver reconnects with backoff after a
disconnect and checks every reply before it can reach ``latest()`` (see :mod:`.remote`).
:class:`_RemoteIO` is a mixin: its state lives on the client.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.runtime.planners.protocol.auth import FrameAuth
from edgerl.runtime.planners.protocol.framing import (
    BASE_VERSION,
    TAG_SIZE,
    ProtocolError,
    decode_array,
    decode_payload,
    encode_frame,
    recv_frame,
)
from edgerl.runtime.planners.protocol.messages import batch_intent_from_msg, chunk_from_msg
from edgerl.runtime.planners.remote.config import RemotePlannerError, _Sent, _Waiter

__all__: list[str] = []

log = logging.getLogger(__name__)

#: Untagged refusals of our frames or key: the connection is unusable, the cause is kept.
_AUTH_REFUSALS = ("unauthorized", "unknown_key")


class _RemoteIO:
    """Send and receive threads, reconnection and reply checks (mixin of ``RemotePlanner``)."""

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
            if not self._connected.wait(self.config.reconnect.reconnect_s):
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
            except ProtocolError as exc:
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
        """Check a reply's tag. A server refusing our tag (or our key id) answers with an
        untagged error (``unauthorized``, ``unknown_key``): report it, with its code, to every
        waiter, then the connection is dropped."""
        try:
            return auth.open(body)
        except ProtocolError as exc:
            code = "unauthorized"
            try:
                msg = decode_payload(body)
                why = f"the server refused our frames: {msg.get('message')}"
                if msg.get("type") == "error" and msg.get("code") in _AUTH_REFUSALS:
                    code = msg["code"]
            except ProtocolError:
                why = f"a reply failed authentication ({exc.message}); is the secret right?"
            refusal = {"type": "error", "code": code, "message": why}
            with self._cv:
                self._conn_error = refusal
            self._wake_all(refusal)
            raise ProtocolError("unauthorized", why) from exc

    def _reconnect(self) -> None:
        """One attempt after a pause that doubles (with +-20 % jitter) up to
        ``reconnect_max_s`` while attempts fail."""
        pause = self._backoff * random.uniform(0.8, 1.2)
        if self._closing.wait(pause):
            return
        try:
            self._connect()
            self._counts["reconnects"] += 1
            self._backoff = self.config.reconnect.reconnect_s
        except (OSError, ProtocolError, RemotePlannerError) as exc:
            self._counts["reconnect_failed"] += 1
            self._backoff = min(self.config.reconnect.reconnect_max_s, 2 * self._backoff)
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
            if msg.get("code") == "unsupported_version" and self.version != BASE_VERSION:
                self.version = BASE_VERSION  # an older server since a reconnect
            log.warning("planner server: %s: %s", msg.get("code"), msg.get("message"))
            with self._cv:
                first = self._conn_error
                if first is None or first.get("code") not in _AUTH_REFUSALS:  # keep the cause
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
        except ProtocolError as exc:
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
        """The reply's chunk, or :class:`ProtocolError` naming what is wrong with it."""
        chunk = chunk_from_msg(msg)
        if chunk.obs_time != sent.obs_time:
            raise ProtocolError("obs_time", f"reply obs_time {chunk.obs_time!r} is not the "
                                            f"request's {sent.obs_time!r}")
        ahead = chunk.t0 - chunk.obs_time
        if not -chunk.horizon_s <= ahead <= self.config.max_future_s:
            raise ProtocolError("t0", f"chunk t0 is {ahead:.3g} s after its obs_time (allowed: "
                                      f"-{chunk.horizon_s:.3g}..{self.config.max_future_s:g} s)")
        expected = (self.info.horizon, self.info.action_dim)
        if self._info_known and chunk.actions.shape != expected:
            raise ProtocolError("shape", f"actions {chunk.actions.shape}, expected {expected}")
        if not np.all(np.isfinite(chunk.actions)):
            raise ProtocolError("non_finite", "actions contain NaN or inf")
        if chunk.intent is not None and self._info_known \
                and chunk.intent_dim != self.info.intent_dim:
            raise ProtocolError("shape", f"intent of {chunk.intent_dim} values, the server's "
                                         f"planner exports {self.info.intent_dim}")
        return chunk

    def _accept_batch(self, msg: dict[str, Any], sent: _Sent, waiter: _Waiter | None) -> None:
        self._counts["received_batches"] += 1
        try:
            actions = decode_array(msg.get("actions"), "actions", ndim=3).astype(np.float32)
            if not np.all(np.isfinite(actions)):
                raise ProtocolError("non_finite", "actions contain NaN or inf")
            if self._info_known and actions.shape[1:] != (self.info.horizon,
                                                          self.info.action_dim):
                raise ProtocolError("shape", f"actions {actions.shape}, expected (n, "
                                             f"{self.info.horizon}, {self.info.action_dim})")
            intent = batch_intent_from_msg(msg, actions.shape[0])
        except ProtocolError as exc:
            self._reject(exc.code, exc.message, waiter)
            return
        if waiter is not None:
            waiter.reply = {**msg, "_actions": actions, "_intent": intent}
            waiter.event.set()

    def _wake_all(self, reply: dict[str, Any]) -> None:
        with self._cv:
            waiters = list(self._waiters.values())
        for w in waiters:
            w.reply = reply
            w.event.set()
