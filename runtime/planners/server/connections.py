"""Connections of :class:`~.server.PlannerServer`: reading, checking and answering frames.

Steps 1-2 of a request's life (see :mod:`.server`), the hardening against hostile clients:
idle and slow-sender timeouts, the frame size limit, authentication tags, a cap on refused
messages per connection and on reply bytes a client leaves unread. :class:`_Connections` is
a mixin: its state lives on the server.

Client identities: with named keys (``ServerConfig.client_keys``) a connection's first frame
may be a client ``hello`` naming its key id; the tags of that connection are then checked
with that key's secret (an unknown key id: ``unknown_key``, closed; else a ``welcome``
answer), and each request's priority with that key's ``max_priority`` (a more urgent claim:
``priority_denied``, the connection stays open). A connection that names no key uses the
shared secret and may claim every priority.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from typing import Any

from edgerl.runtime.planners.protocol.auth import FrameAuth, read_key_id, welcome_msg
from edgerl.runtime.planners.protocol.framing import (
    HEADER,
    PRIORITIES,
    TAG_SIZE,
    ProtocolError,
    decode_payload,
    encode_frame,
)
from edgerl.runtime.planners.protocol.messages import (
    PlanRequest,
    error_msg,
    parse_plan_batch_request,
    parse_plan_request,
)
from edgerl.runtime.planners.server.state import _Session

__all__: list[str] = []

log = logging.getLogger(__name__)


class _Connections:
    """Per-connection coroutine, frame reading and checking, and output (mixin of
    ``PlannerServer``)."""

    # --- connections -----------------------------------------------------------------------
    async def _serve_connection(self, reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        peer_s = f"{peer[0]}:{peer[1]}" if peer else "?"
        host = str(peer[0]) if peer else "?"
        cfg = self.config
        authenticating = cfg.secret is not None or bool(cfg.client_keys)
        refusal = self._admission_refusal(host, authenticating)
        if refusal:
            self._count("refused")
            log.warning("refusing %s: %s", peer_s, refusal)
            writer.write(encode_frame(error_msg(-1, "overloaded", refusal)))
            await self._close_writer(writer)
            return
        auth = FrameAuth(cfg.secret, side="server") if authenticating else None
        session = _Session(next(self._ids), peer_s, writer, auth, tokens=4.0 *
                           cfg.batching.max_batch_rows, refilled=time.monotonic(),
                           authenticated=auth is None, host=host)
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

    def _admission_refusal(self, host: str, authenticating: bool) -> str:
        """Why a new connection from ``host`` is refused ("" = admitted): authenticated
        connections count against ``max_clients``; on a server with a secret, connections
        still authenticating have a cap in all and one per address, so idle unauthenticated
        sockets cannot lock authenticated clients out."""
        cfg, limits = self.config, self.config.connections
        with self._lock:
            sessions = list(self._sessions.values())
        if sum(s.authenticated for s in sessions) >= cfg.max_clients:
            return f"too many clients ({cfg.max_clients} connected)"
        if not authenticating:
            return ""
        pending = [s for s in sessions if not s.authenticated]
        if len(pending) >= limits.max_unauthenticated:
            return f"too many connections still authenticating ({limits.max_unauthenticated})"
        if sum(s.host == host for s in pending) >= limits.max_unauthenticated_per_peer:
            return (f"too many connections still authenticating from {host} "
                    f"({limits.max_unauthenticated_per_peer})")
        return ""

    async def _read_frame(self, reader: asyncio.StreamReader, session: _Session
                          ) -> tuple[bytes | None, str]:
        """One frame body (tag included), or ``(None, why)`` when the connection must end."""
        timeouts = self.config.connections
        if session.authenticated:
            wait, idle = timeouts.idle_timeout_s, ("idle_timeout", f"no request for "
                                                   f"{timeouts.idle_timeout_s:g} s",
                                                   "idle timeout")
        else:
            wait, idle = timeouts.auth_timeout_s, ("auth_timeout", f"no authenticated frame "
                                                   f"within {timeouts.auth_timeout_s:g} s",
                                                   "authentication timeout")
        first, why = await self._within(
            session, reader.readexactly(1), wait, "closed by peer", idle)
        if why:
            return None, why
        limit = self.config.max_frame + (TAG_SIZE if session.auth else 0)

        async def rest() -> bytes | None:
            (size,) = HEADER.unpack(first + await reader.readexactly(HEADER.size - 1))
            if size > limit:
                self._refuse_and_close(session, "frame_too_large", f"frame of {size} bytes "
                                       f"exceeds the limit of {limit} bytes")
                return None
            return await reader.readexactly(size)

        body, why = await self._within(
            session, rest(), timeouts.read_timeout_s, "closed mid-frame",
            ("read_timeout", f"frame not complete {timeouts.read_timeout_s:g} s after its first "
             "byte", "read timeout (slow sender)"))
        if why:
            return None, why
        if body is None:
            return None, "frame exceeds the size limit"
        return body, ""

    async def _within(self, session: _Session, read: Any, timeout_s: float, closed: str,
                      on_timeout: tuple[str, str, str]) -> tuple[Any, str]:
        """Await ``read`` for at most ``timeout_s``: ``(result, "")``, ``(None, closed)`` when
        the peer closed, or, on a timeout, refuse and close with ``on_timeout = (code,
        message, why)`` and return ``(None, why)``."""
        try:
            return await asyncio.wait_for(read, timeout_s), ""
        except asyncio.IncompleteReadError:
            return None, closed
        except asyncio.TimeoutError:
            code, message, why = on_timeout
            self._refuse_and_close(session, code, message)
            return None, why

    def _refuse_and_close(self, session: _Session, code: str, message: str) -> None:
        self._count("bad_frames")
        self._drop(code)
        log.warning("client %s: %s: %s; closing the connection", session.peer, code, message)
        if session.authenticated:
            self._send(session, error_msg(-1, code, message))
        elif not session.writer.is_closing():  # untagged: no tag sequence to continue
            session.writer.write(encode_frame(error_msg(-1, code, message)))
        session.closed = True

    def _handle(self, session: _Session, body: bytes) -> None:
        """Answer or queue one frame; every refusal is a named error reply."""
        req_id = -1
        first = False
        try:
            if session.auth is not None:
                if not session.authenticated:
                    first = True
                    self._choose_key(session, body)
                body = session.auth.open(body)
                session.authenticated = True
                if first and session.identity:
                    log.info("client %d (%s) authenticated as %r (priority up to %s)",
                             session.cid, session.peer, session.identity, session.max_priority)
            msg = decode_payload(body, max_frame=self.config.max_frame,
                                 max_items=max(64, self.config.batching.max_batch_rows))
            raw_id = msg.get("id", -1)
            req_id = raw_id if type(raw_id) is int and abs(raw_id) < (1 << 63) else -1
            kind = msg["type"]
            if kind == "hello" and first:  # the client's hello: its key is chosen
                self._send(session, welcome_msg(session.identity, session.max_priority))
                return
            if kind == "health":
                self._count("health_requests")
                self._send(session, self._health_reply(req_id))
            elif kind == "plan":
                self._admit(session, self._authorize(
                    session, parse_plan_request(msg, self.config.obs_dim), msg))
            elif kind == "plan_batch":
                if not self._has_batch:
                    raise ProtocolError("unknown_type", "this planner does not answer plan_batch "
                                                        "(it has no plan_batch method)")
                self._admit(session, self._authorize(session, parse_plan_batch_request(
                    msg, self.config.obs_dim, max_batch=1 << 20), msg))
            else:
                raise ProtocolError("unknown_type", f"message type {kind!r} is not known "
                                                    "(plan, plan_batch, health)")
        except ProtocolError as exc:
            if exc.code in ("quota_exceeded", "overloaded", "deadline_unmeetable"):
                self._drop(exc.code)
                log.debug("client %s: %s", session.peer, exc)
            elif exc.code == "priority_denied":
                self._drop(exc.code)
                session.counts[exc.code] += 1
                # a misconfigured client is worth one warning per connection, not a flood
                log.log(logging.WARNING if session.counts[exc.code] == 1 else logging.DEBUG,
                        "client %s: %s", session.peer, exc)
            else:
                self._count("bad_frames")
                session.bad_frames += 1
                # the first refusal per connection is a warning; an attacker cannot flood logs
                log.log(logging.WARNING if session.bad_frames == 1 else logging.DEBUG,
                        "client %s: refused a message: %s", session.peer, exc)
            if exc.code == "unknown_key":
                self._drop(exc.code)
            if exc.code in ("unauthorized", "unknown_key") or not session.authenticated:
                # untagged, so a misconfigured client can read it
                session.writer.write(encode_frame(error_msg(req_id, exc.code, exc.message)))
                session.closed = True  # the tag sequence is broken: nothing later can verify
                return
            self._send(session, error_msg(req_id, exc.code, exc.message))
            if session.bad_frames >= self.config.connections.max_bad_frames:
                self._refuse_and_close(session, "quota_exceeded", f"{session.bad_frames} "
                                       "refused messages on this connection")

    def _choose_key(self, session: _Session, body: bytes) -> None:
        """Pick the secret that checks a connection's first frame: the key its client hello
        names (``unknown_key`` when the server has none of that name), else the shared
        secret (``unauthorized`` when the server has none: named keys only)."""
        assert session.auth is not None
        key_id = read_key_id(body)
        if key_id is None:
            if self.config.secret is None:
                raise ProtocolError("unauthorized", "this server accepts named keys only: "
                                                    "the client must name its key id in a hello")
            return
        key = self.config.client_keys.get(key_id)
        if key is None:
            raise ProtocolError("unknown_key", f"key id {key_id!r} is not known to this server")
        session.auth.use_secret(key.secret)
        session.identity, session.max_priority = key_id, key.max_priority

    def _authorize(self, session: _Session, request: PlanRequest,
                   msg: dict[str, Any]) -> PlanRequest:
        """``request`` when its priority is within the connection's key's maximum; a request
        that names no priority gets the protocol default lowered to that maximum; a claim
        above it is refused with ``priority_denied`` (not lowered: the client learns its
        key does not allow it)."""
        allowed = PRIORITIES.index(session.max_priority)
        if PRIORITIES.index(request.priority) >= allowed:
            return request
        if "priority" not in msg:
            return dataclasses.replace(request, priority=session.max_priority)
        raise ProtocolError("priority_denied", (
            f"key {session.identity!r} may claim priority {session.max_priority!r} at most, "
            f"request {request.id} claims {request.priority!r}"))

    # --- output ----------------------------------------------------------------------------
    def _send(self, session: _Session, payload: dict[str, Any]) -> None:
        """Queue a reply on the connection (never blocks); a client that lets more than
        ``max_outbuf`` bytes pile up is closed. Untagged while the connection's secret is
        not known yet (a server with named keys only, before the client's first frame)."""
        if session.writer.is_closing():
            return
        auth = session.auth
        frame = auth.seal(payload) if auth is not None and auth.keyed else encode_frame(payload)
        session.writer.write(frame)
        if session.writer.transport.get_write_buffer_size() > self.config.connections.max_outbuf:
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
            await asyncio.wait_for(writer.drain(), self.config.connections.write_timeout_s)
        writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(writer.wait_closed(), self.config.connections.write_timeout_s)
