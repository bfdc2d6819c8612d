"""Signed operator messages: who may release an e-stop or take over the robot.

Stopping is open to anyone (``robot/estop`` true, the firmware's e-stop, a dead link); what
moves the robot again or overrides it needs the operator's key: the e-stop re-arm
(``robot/estop_reset``), interventions (``operator/intervention``) and the serial bridge's
e-stop clear. Each such message carries, in its ``header.frame_id``, a tag

    ``edgerl-op1 <key_id> <seq> <hmac>``

where ``hmac`` is HMAC-SHA256 (hex) with the operator key over the scheme, the topic, the key
id, the sequence number, the header stamp (ns) and the message's payload
(:func:`intervention_payload`; empty for a re-arm). A receiver
(:class:`OperatorVerifier`) refuses, by reason: no tag (``unsigned``), a tag it cannot parse
(``malformed_tag``), a key it does not hold (``unknown_key``), a wrong HMAC
(``bad_signature``), a sequence number not above the last accepted one for that key
(``replayed``) and a stamp outside its freshness window (``stale`` / ``future``).

The signer's sequence numbers are microseconds of wall time (kept strictly increasing), so a
restarted operator console keeps going above what the receivers saw. What this protects and
what it does not: ``docs/reliability.md`` (threat model).

Key files are JSON ``{"key_id": str, "secret": hex}`` readable by their owner only
(:meth:`OperatorKey.load` refuses a group- or world-readable file).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
import struct
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "ENV_KEY",
    "REASONS",
    "SCHEME",
    "OperatorAuthError",
    "OperatorKey",
    "OperatorSigner",
    "OperatorVerifier",
    "intervention_payload",
    "load_operator_key",
]

SCHEME = "edgerl-op1"
#: Environment variable naming the operator key file.
ENV_KEY = "EDGERL_OPERATOR_KEY"
#: Shortest secret accepted (bytes).
MIN_SECRET_BYTES = 16
#: Every reason a verifier refuses a message with.
REASONS = ("unsigned", "malformed_tag", "unknown_key", "bad_signature", "replayed", "stale",
           "future")
_KEY_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


class OperatorAuthError(ValueError):
    """A key file or key that cannot be used (named problem in the message)."""


@dataclass(frozen=True)
class OperatorKey:
    """One operator key.

    Attributes:
        key_id: Name of the key (letters, digits, ``_.-``; 1-64 characters), sent in clear.
        secret: The shared secret (>= 16 bytes).
    """

    key_id: str
    secret: bytes

    def __post_init__(self) -> None:
        if not (1 <= len(self.key_id) <= 64) or not set(self.key_id) <= _KEY_ID_CHARS:
            raise OperatorAuthError(f"operator key id {self.key_id!r}: use 1-64 letters, "
                                    "digits, '_', '.' or '-'")
        if len(self.secret) < MIN_SECRET_BYTES:
            raise OperatorAuthError(f"operator key {self.key_id!r}: secret has "
                                    f"{len(self.secret)} bytes, at least {MIN_SECRET_BYTES} "
                                    "needed")

    @classmethod
    def generate(cls, key_id: str = "operator") -> OperatorKey:
        """A fresh key with a 32-byte random secret."""
        return cls(key_id, secrets.token_bytes(32))

    def save(self, path: str | Path, force: bool = False) -> Path:
        """Write the key file (mode 0600). Refuses to overwrite unless ``force``."""
        path = Path(path)
        if path.is_dir():
            raise OperatorAuthError(f"operator key file {path} is a directory")
        if path.exists() and not force:
            raise OperatorAuthError(f"operator key file {path} exists (overwrite with force)")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"key_id": self.key_id, "secret": self.secret.hex()}, f)
        os.chmod(path, 0o600)
        return path

    @classmethod
    def load(cls, path: str | Path) -> OperatorKey:
        """Read a key file; refuses a missing, unparsable or group/world-readable one."""
        path = Path(path)
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            raise OperatorAuthError(f"operator key file {path}: {exc.strerror}") from exc
        if not stat.S_ISREG(mode):
            raise OperatorAuthError(f"operator key file {path} is not a regular file")
        if mode & 0o077:
            raise OperatorAuthError(f"operator key file {path} is readable by others (mode "
                                    f"{stat.S_IMODE(mode):o}); chmod 600 it")
        try:
            data = json.loads(path.read_text())
            return cls(str(data["key_id"]), bytes.fromhex(data["secret"]))
        except (ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, OperatorAuthError):
                raise
            raise OperatorAuthError(f"operator key file {path}: expected JSON with 'key_id' "
                                    f"and a hex 'secret' ({exc})") from exc


def load_operator_key(path: str | Path | None = None) -> OperatorKey | None:
    """The key in ``path``, else in the file named by ``EDGERL_OPERATOR_KEY``, else None."""
    path = path or os.environ.get(ENV_KEY) or None
    return OperatorKey.load(path) if path else None


def intervention_payload(kind: str, values: Sequence[float] | np.ndarray) -> bytes:
    """The signed payload of an intervention: its kind and its command as float32."""
    return kind.encode() + b"\0" + np.asarray(values, dtype="<f4").tobytes()


def _tag(secret: bytes, topic: str, key_id: str, seq: int, stamp_ns: int,
         payload: bytes) -> str:
    head = f"{SCHEME}\0{topic.lstrip('/')}\0{key_id}\0".encode()
    body = head + struct.pack("<QQ", seq, stamp_ns & 0xFFFF_FFFF_FFFF_FFFF) + payload
    return hmac.new(secret, body, hashlib.sha256).hexdigest()


class OperatorSigner:
    """Makes the ``frame_id`` tag of operator messages signed with ``key``."""

    def __init__(self, key: OperatorKey) -> None:
        self.key = key
        self._seq = 0
        self._lock = threading.Lock()

    def next_seq(self) -> int:
        """Wall-clock microseconds, strictly increasing within this signer."""
        with self._lock:
            self._seq = max(self._seq + 1, time.time_ns() // 1000)
            return self._seq

    def tag(self, topic: str, stamp_ns: int, payload: bytes = b"") -> str:
        """The ``frame_id`` for a message on ``topic`` stamped ``stamp_ns`` (ns)."""
        seq = self.next_seq()
        mac = _tag(self.key.secret, topic, self.key.key_id, seq, stamp_ns, payload)
        return f"{SCHEME} {self.key.key_id} {seq} {mac}"


class OperatorVerifier:
    """Checks operator message tags (see the module doc); counts refusals by reason.

    Args:
        keys: The operator keys this receiver accepts (by key id).
        max_age_s: Oldest stamp accepted (s before now; 0: freshness left to the caller).
        future_skew_s: Newest stamp accepted (s after now).
    """

    def __init__(self, keys: Sequence[OperatorKey] | Mapping[str, OperatorKey],
                 max_age_s: float = 1.0, future_skew_s: float = 0.05) -> None:
        items = keys.values() if isinstance(keys, Mapping) else keys
        self.keys = {k.key_id: k for k in items}
        self.max_age_s, self.future_skew_s = float(max_age_s), float(future_skew_s)
        self._last_seq: dict[str, int] = {}
        self._lock = threading.Lock()
        self.accepted = 0
        self.refused: dict[str, int] = {}

    def check(self, topic: str, frame_id: str, stamp_ns: int, payload: bytes = b"",
              now_ns: int | None = None) -> str | None:
        """None if the message is the operator's and new, else the refusal's reason."""
        reason = self._check(topic, frame_id, stamp_ns, payload, now_ns)
        with self._lock:
            if reason is None:
                self.accepted += 1
            else:
                self.refused[reason] = self.refused.get(reason, 0) + 1
        return reason

    def _check(self, topic: str, frame_id: str, stamp_ns: int, payload: bytes,
               now_ns: int | None) -> str | None:
        parts = frame_id.split(" ")
        if not frame_id.startswith(SCHEME + " "):
            return "unsigned"
        if len(parts) != 4 or not parts[2].isdigit() or len(parts[3]) != 64:
            return "malformed_tag"
        _, key_id, seq_text, mac = parts
        key = self.keys.get(key_id)
        if key is None:
            return "unknown_key"
        seq = int(seq_text)
        if seq >= 1 << 64:
            return "malformed_tag"
        want = _tag(key.secret, topic, key_id, seq, stamp_ns, payload)
        if not hmac.compare_digest(want, mac):
            return "bad_signature"
        if self.max_age_s > 0:
            now_ns = time.time_ns() if now_ns is None else now_ns
            age_s = (now_ns - stamp_ns) * 1e-9
            if age_s > self.max_age_s:
                return "stale"
            if -age_s > self.future_skew_s:
                return "future"
        with self._lock:
            if seq <= self._last_seq.get(key_id, 0):
                return "replayed"
            self._last_seq[key_id] = seq
        return None
