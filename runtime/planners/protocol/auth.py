"""Authentication of planner protocol frames: HMAC-SHA256 tags, the shared secret, named
client keys, loopback.

See :mod:`.framing` for the tag layout (``HMAC-SHA256(secret, nonce | direction | seq | body)``).

Named keys: a server may hold several secrets, one per client identity (its key id). A client
holding one sends :func:`client_hello` as its first frame, tagged with that key's secret; the
key id is in the clear, so the server reads it (:func:`read_key_id`), switches the
connection's :class:`FrameAuth` to that key (:meth:`FrameAuth.use_secret`), only then checks
the tag, and answers with a tagged ``welcome`` (:func:`check_welcome` on the client). A
client that sends no such hello is checked with the shared secret.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from typing import Any

from edgerl.runtime.planners.protocol.framing import (
    BASE_VERSION,
    HEADER,
    TAG_SIZE,
    ProtocolError,
    _short,
    decode_payload,
    encode_frame,
)

__all__ = ["FrameAuth", "check_key_id", "check_welcome", "client_hello", "is_loopback",
           "load_secret", "read_key_id", "welcome_msg"]

#: What a key id may look like: 1 to 64 letters, digits, ``.``, ``_`` or ``-``.
KEY_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")


class FrameAuth:
    """HMAC-SHA256 tags for one connection's frames (layout in :mod:`.framing`).

    Args:
        secret: The secret (at least 16 bytes): the shared one, or the client's named key.
            ``None`` (server side only): not known yet, until :meth:`use_secret` (a server
            with named keys and no shared secret, before the client's hello).
        nonce: The server's per-connection nonce (from its ``hello``); ``None`` draws one
            (the server side).
        side: ``"server"`` or ``"client"``: which direction this end sends.
    """

    def __init__(self, secret: bytes | None, nonce: bytes | None = None,
                 side: str = "server") -> None:
        if side not in ("server", "client"):
            raise ValueError(f"side must be 'server' or 'client', got {side!r}")
        self.secret = None if secret is None else _checked(secret)
        self.nonce = os.urandom(16) if nonce is None else bytes(nonce)
        self._out_dir, self._in_dir = (b"S", b"C") if side == "server" else (b"C", b"S")
        self._out_seq = 0
        self._in_seq = 0

    @property
    def keyed(self) -> bool:
        """Whether a secret is set (frames can be tagged and checked)."""
        return self.secret is not None

    def use_secret(self, secret: bytes) -> None:
        """Tag and check with ``secret`` from now on: the server, once the client's hello has
        named its key. Only before the first frame either way (``RuntimeError`` after)."""
        if self._out_seq or self._in_seq:
            raise RuntimeError("the secret of a connection cannot change after its first frame")
        self.secret = _checked(secret)

    def hello(self) -> bytes:
        """The server's first, untagged frame."""
        return encode_frame({"type": "hello", "auth": "hmac-sha256", "nonce": self.nonce})

    def _tag(self, direction: bytes, seq: int, body: bytes) -> bytes:
        if self.secret is None:
            raise ProtocolError("unauthorized", "no secret chosen for this connection (this "
                                                "server accepts named keys only: the client's "
                                                "hello must name its key id)")
        return hmac.new(self.secret, self.nonce + direction + seq.to_bytes(8, "big") + body,
                        hashlib.sha256).digest()

    def seal(self, payload: dict[str, Any]) -> bytes:
        """Header + msgpack body + tag for the next outgoing frame."""
        body = encode_frame(payload)[HEADER.size:]
        tag = self._tag(self._out_dir, self._out_seq, body)
        self._out_seq += 1
        return HEADER.pack(len(body) + TAG_SIZE) + body + tag

    def open(self, frame_body: bytes) -> bytes:
        """Check and strip the tag of the next incoming frame body; raises ``unauthorized``."""
        if len(frame_body) < TAG_SIZE:
            raise ProtocolError("unauthorized", "frame has no authentication tag")
        body, tag = frame_body[:-TAG_SIZE], frame_body[-TAG_SIZE:]
        if not hmac.compare_digest(tag, self._tag(self._in_dir, self._in_seq, body)):
            raise ProtocolError("unauthorized", "bad authentication tag (wrong secret, or a "
                                                "replayed or reordered frame)")
        self._in_seq += 1
        return body


def _checked(secret: bytes) -> bytes:
    if len(secret) < 16:
        raise ValueError(f"the shared secret must have at least 16 bytes, got {len(secret)}")
    return bytes(secret)


def check_key_id(key_id: Any) -> str:
    """``key_id`` when it is a valid key id (:data:`KEY_ID_PATTERN`), else ``ValueError``."""
    if not isinstance(key_id, str) or not KEY_ID_PATTERN.fullmatch(key_id):
        raise ValueError(f"a key id is 1 to 64 letters, digits, '.', '_' or '-', got "
                         f"{_short(key_id)}")
    return key_id


def client_hello(key_id: str) -> dict[str, Any]:
    """The client's hello naming its key: its first frame, to be tagged with that key's
    secret (:meth:`FrameAuth.seal`)."""
    return {"v": BASE_VERSION, "type": "hello", "key_id": check_key_id(key_id)}


def welcome_msg(key_id: str, max_priority: str) -> dict[str, Any]:
    """The server's answer to a client hello (``key_id`` ``""``: the shared secret)."""
    msg = {"v": BASE_VERSION, "type": "welcome", "max_priority": max_priority}
    if key_id:
        msg["key_id"] = key_id
    return msg


def check_welcome(msg: dict[str, Any], key_id: str) -> str:
    """The ``max_priority`` of the server's answer to our hello naming ``key_id``; raises
    :class:`ProtocolError` (``error`` replies keep their code) for anything else."""
    if msg.get("type") == "error":
        raise ProtocolError(str(msg.get("code")), str(msg.get("message")))
    if msg.get("type") != "welcome" or msg.get("key_id") != key_id:
        raise ProtocolError("malformed", f"expected the server's welcome for key {key_id!r}, "
                                         f"got {_short(msg.get('type'))}")
    return str(msg.get("max_priority"))


def read_key_id(frame_body: bytes) -> str | None:
    """The key id a connection's first frame names (server side, before its tag is checked,
    so nothing here is trusted yet): the ``key_id`` of a client ``hello``, or ``None`` for any
    other frame (checked with the shared secret). Raises ``malformed`` for a hello whose key id
    is not a valid one."""
    if len(frame_body) <= TAG_SIZE:
        return None
    try:
        msg = decode_payload(frame_body[:-TAG_SIZE], max_frame=4096, max_items=16)
    except ProtocolError:
        return None  # not a hello: the tag check with the shared secret refuses it if bad
    if msg.get("type") != "hello" or "key_id" not in msg:
        return None
    try:
        return check_key_id(msg["key_id"])
    except ValueError as exc:
        raise ProtocolError("malformed", f"hello.key_id: {exc}") from exc


def load_secret(path: str | None = None, env: str = "EDGERL_PLANNER_SECRET") -> bytes | None:
    """The shared secret from a file (stripped of surrounding whitespace) or the environment
    variable ``env``; ``None`` when neither is given. Raises ``ValueError`` when too short."""
    if path:
        with open(path, "rb") as f:
            secret = f.read().strip()
    elif os.environ.get(env):
        secret = os.environ[env].encode()
    else:
        return None
    if len(secret) < 16:
        raise ValueError(f"the shared secret ({path or env}) must have at least 16 bytes, "
                         f"got {len(secret)}")
    return secret


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` only listens on this machine."""
    if host == "localhost":
        return True
    try:
        import ipaddress

        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
