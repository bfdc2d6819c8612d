"""Authentication of planner protocol frames: HMAC-SHA256 tags, the shared secret, loopback.

See :mod:`.framing` for the tag layout (``HMAC-SHA256(secret, nonce | direction | seq | body)``).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

from edgerl.runtime.planners.protocol.framing import HEADER, TAG_SIZE, ProtocolError, encode_frame

__all__ = ["FrameAuth", "is_loopback", "load_secret"]


class FrameAuth:
    """HMAC-SHA256 tags for one connection's frames (layout in :mod:`.framing`).

    Args:
        secret: The shared secret (at least 16 bytes).
        nonce: The server's per-connection nonce (from its ``hello``); ``None`` draws one
            (the server side).
        side: ``"server"`` or ``"client"``: which direction this end sends.
    """

    def __init__(self, secret: bytes, nonce: bytes | None = None, side: str = "server") -> None:
        if len(secret) < 16:
            raise ValueError(f"the shared secret must have at least 16 bytes, got {len(secret)}")
        if side not in ("server", "client"):
            raise ValueError(f"side must be 'server' or 'client', got {side!r}")
        self.secret = bytes(secret)
        self.nonce = os.urandom(16) if nonce is None else bytes(nonce)
        self._out_dir, self._in_dir = (b"S", b"C") if side == "server" else (b"C", b"S")
        self._out_seq = 0
        self._in_seq = 0

    def hello(self) -> bytes:
        """The server's first, untagged frame."""
        return encode_frame({"type": "hello", "auth": "hmac-sha256", "nonce": self.nonce})

    def _tag(self, direction: bytes, seq: int, body: bytes) -> bytes:
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
