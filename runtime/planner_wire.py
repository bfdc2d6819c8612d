"""The planner-serving wire protocol: length-prefixed msgpack frames, versioned, no pickle.

A frame on the TCP stream is ``uint32 big-endian payload length`` followed by that many bytes
of msgpack. The payload is a map with at least ``"v"`` (protocol version, :data:`PROTOCOL_VERSION`)
and ``"type"``. Arrays travel as ``{"dtype": "float32", "shape": [...], "data": <bytes>}``
(little-endian, C order). msgpack extension types are refused, so nothing on the wire can
build an arbitrary Python object. See ``docs/planner.md`` for the full message list.

Client -> server:

* ``plan``: ``id`` (int), ``obs`` (array, ``(O,)`` float32), ``obs_time`` (client monotonic
  seconds when the observation was taken), ``instruction`` (str), ``deadline_s`` (budget in
  seconds from the server's receipt; ``0`` = none), optional ``step`` (int, sim step index),
  optional ``priority`` (``"robot"``, the default, or ``"training"``).
* ``plan_batch``: ``id``, ``obs`` (``(n, O)``), ``instructions`` (n str), ``obs_time``,
  ``deadline_s``, optional ``priority`` (default ``"training"``): many observations in one
  request (a training-time planner service answering all simulated envs at once).
* ``health``: ``id``.

Server -> client:

* ``chunk``: ``id``, ``actions`` (array ``(H, A)`` float32), ``t0``, ``dt``, ``step0``,
  ``obs_time``, ``source``, ``latency_s`` (server compute time).
* ``chunk_batch``: ``id``, ``actions`` (``(n, H, A)`` float32), ``t0``, ``dt``,
  ``obs_time``, ``latency_s``.
* ``health``: ``id``, ``state`` (``PlannerHealth`` value), ``info`` (PlannerInfo fields),
  ``metrics`` (counters and latency percentiles).
* ``error``: ``id`` (``-1`` when unknown), ``code`` (one of :data:`ERROR_CODES`), ``message``.
* ``hello`` (authenticated servers only, the first frame, itself untagged): ``auth``
  (``"hmac-sha256"``), ``nonce`` (16 bytes).

Authentication (:class:`FrameAuth`): with a shared secret every frame after ``hello`` carries a
32-byte tag after its msgpack body (the length prefix counts it):
``HMAC-SHA256(secret, nonce | direction | seq (uint64 BE) | body)``, direction ``b"C"`` from
the client and ``b"S"`` from the server, ``seq`` counting that direction's frames from 0. The
server's nonce binds the tags to one connection and ``seq`` to one position in it, so a frame
can be neither forged nor replayed nor reordered without the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import socket
import struct
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from edgerl.chunk import ActionChunk

__all__ = [
    "DEFAULT_MAX_FRAME",
    "ERROR_CODES",
    "HEADER",
    "PROTOCOL_VERSION",
    "FrameAuth",
    "FrameReader",
    "FrameTooLarge",
    "PRIORITIES",
    "PlanRequest",
    "WireError",
    "batch_to_msg",
    "chunk_from_msg",
    "chunk_to_msg",
    "decode_array",
    "decode_payload",
    "encode_array",
    "encode_frame",
    "error_msg",
    "is_loopback",
    "load_secret",
    "parse_plan_batch_request",
    "parse_plan_request",
    "recv_frame",
]

#: Version of this protocol. A server refuses other versions with an ``unsupported_version``
#: error reply (the connection stays open: framing is version independent).
PROTOCOL_VERSION = 1
#: Frame header: payload length, uint32 big-endian.
HEADER = struct.Struct(">I")
#: Default largest accepted payload (bytes). A camera image would need more; raise it.
DEFAULT_MAX_FRAME = 1 << 20

#: Error codes a server may send.
ERROR_CODES = ("unsupported_version", "malformed", "frame_too_large", "unknown_type",
               "deadline_exceeded", "deadline_unmeetable", "superseded", "planner_error",
               "overloaded", "quota_exceeded", "unauthorized", "read_timeout", "idle_timeout",
               "shutting_down", "internal")
#: Request priorities, most urgent first: a robot waiting for its next chunk goes before a
#: training batch.
PRIORITIES = ("robot", "training")
#: Largest dimension and element count of an array on the wire (a shape such as
#: ``[2**32, 2**32]`` is refused before any arithmetic can overflow).
MAX_ARRAY_ELEMENTS = 1 << 28
#: Longest accepted instruction text (characters).
MAX_INSTRUCTION = 1024
#: HMAC-SHA256 tag length (bytes) appended to authenticated frames.
TAG_SIZE = 32

_DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
           "uint8": np.uint8}


class WireError(ValueError):
    """A payload does not follow the protocol; ``code`` is one of :data:`ERROR_CODES`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class FrameTooLarge(WireError):
    """The length prefix announces more than the receiver accepts; the stream is abandoned."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__("frame_too_large", f"frame of {size} bytes exceeds the limit of "
                                            f"{limit} bytes")
        self.size = size


# --- arrays ----------------------------------------------------------------------------------
def encode_array(a: np.ndarray) -> dict[str, Any]:
    """``{"dtype", "shape", "data"}`` with little-endian C-order bytes."""
    a = np.asarray(a)
    name = a.dtype.name
    if name not in _DTYPES:
        raise WireError("malformed", f"dtype {name} cannot travel on the wire")
    data = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()
    return {"dtype": name, "shape": list(a.shape), "data": data}


def decode_array(msg: Any, field: str, *, ndim: int | None = None) -> np.ndarray:
    """Inverse of :func:`encode_array`; raises :class:`WireError` naming ``field``.

    Everything is checked before use: ``dtype`` a known name (not a list or a map), ``shape``
    a list of plain non-negative ints (``True`` is not a dimension) whose product, computed
    with Python integers, stays below :data:`MAX_ARRAY_ELEMENTS` and matches ``data``.
    """
    if not isinstance(msg, dict):
        raise WireError("malformed", f"{field}: expected an array map, got {type(msg).__name__}")
    dtype, shape, data = msg.get("dtype"), msg.get("shape"), msg.get("data")
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise WireError("malformed", f"{field}.dtype: unsupported {_short(dtype)}")
    if (not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape)
            or (ndim is not None and len(shape) != ndim) or len(shape) > 8):
        raise WireError("malformed", f"{field}.shape: expected {ndim or 'n'} non-negative "
                                     f"ints, got {_short(shape)}")
    count = math.prod(shape)
    if count > MAX_ARRAY_ELEMENTS:
        raise WireError("malformed", f"{field}.shape: {shape} has {count} elements (limit "
                                     f"{MAX_ARRAY_ELEMENTS})")
    if not isinstance(data, bytes):
        raise WireError("malformed", f"{field}.data: expected bytes")
    dt = np.dtype(_DTYPES[dtype]).newbyteorder("<")
    expected = count * dt.itemsize
    if len(data) != expected:
        raise WireError("malformed", f"{field}.data: {len(data)} bytes for shape {shape} "
                                     f"{dtype} (expected {expected})")
    return np.frombuffer(data, dtype=dt).reshape(shape).astype(_DTYPES[dtype])


def _short(value: Any, limit: int = 60) -> str:
    """``repr`` cut to ``limit`` characters (error messages must stay small)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


# --- frames ------------------------------------------------------------------------------------
def _refuse_ext(code: int, data: bytes) -> Any:
    raise WireError("malformed", f"msgpack extension type {code} is not allowed")


def encode_frame(payload: dict[str, Any]) -> bytes:
    """Header + msgpack bytes for one message (``"v"`` is added when missing)."""
    if "v" not in payload:
        payload = {"v": PROTOCOL_VERSION, **payload}
    body = msgpack.packb(payload, use_bin_type=True)
    return HEADER.pack(len(body)) + body


def decode_payload(body: bytes, *, max_frame: int = DEFAULT_MAX_FRAME,
                   max_items: int = 1 << 16) -> dict[str, Any]:
    """msgpack bytes -> message map, checking the version; raises :class:`WireError`.

    ``max_items`` bounds every list (e.g. a ``plan_batch``'s instructions): msgpack checks
    it from the list's header, so an oversized batch is refused (``quota_exceeded``) before
    any of its items is decoded.
    """
    try:
        msg = msgpack.unpackb(body, raw=False, strict_map_key=True, ext_hook=_refuse_ext,
                              max_bin_len=max_frame, max_str_len=max_frame,
                              max_array_len=max_items, max_map_len=1 << 10)
    except WireError:
        raise
    except ValueError as exc:
        if "max_array_len" in str(exc):
            raise WireError("quota_exceeded", f"a list longer than {max_items} items "
                                              f"(max_batch_rows): {exc}") from exc
        raise WireError("malformed", f"not a msgpack document ({exc})") from exc
    except Exception as exc:  # msgpack raises several unrelated types for bad bytes
        raise WireError("malformed",
                        f"not a msgpack document ({type(exc).__name__}: {exc})") from exc
    if not isinstance(msg, dict):
        raise WireError("malformed", f"payload must be a map, got {type(msg).__name__}")
    version = msg.get("v")
    if version != PROTOCOL_VERSION:
        raise WireError("unsupported_version", f"protocol version {version!r} is not supported "
                                               f"(this side speaks {PROTOCOL_VERSION})")
    if not isinstance(msg.get("type"), str):
        raise WireError("malformed", "payload.type: missing or not a string")
    return msg


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    """Read exactly ``n`` bytes; ``None`` on a clean close before the first byte."""
    buf = bytearray()
    while len(buf) < n:
        part = sock.recv(n - len(buf))
        if not part:
            if not buf:
                return None
            raise ConnectionError(f"connection closed mid-frame ({len(buf)}/{n} bytes)")
        buf += part
    return bytes(buf)


def recv_frame(sock: socket.socket, *, max_frame: int = DEFAULT_MAX_FRAME) -> bytes | None:
    """Read one frame's payload bytes from a blocking socket; ``None`` when the peer closed.

    Raises :class:`FrameTooLarge` before reading an oversized body (the caller closes).
    """
    header = _recv_exact(sock, HEADER.size)
    if header is None:
        return None
    (size,) = HEADER.unpack(header)
    if size > max_frame:
        raise FrameTooLarge(size, max_frame)
    body = _recv_exact(sock, size)
    if body is None:
        raise ConnectionError("connection closed after a frame header")
    return body


class FrameReader:
    """Incremental frame splitter for non-blocking readers: ``feed(bytes) -> [payload, ...]``."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self._buf += data
        out = []
        while len(self._buf) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._buf)
            if size > self.max_frame:
                raise FrameTooLarge(size, self.max_frame)
            if len(self._buf) < HEADER.size + size:
                break
            out.append(bytes(self._buf[HEADER.size:HEADER.size + size]))
            del self._buf[:HEADER.size + size]
        return out


# --- authentication ----------------------------------------------------------------------------
class FrameAuth:
    """HMAC-SHA256 tags for one connection's frames (see the module docstring).

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
            raise WireError("unauthorized", "frame has no authentication tag")
        body, tag = frame_body[:-TAG_SIZE], frame_body[-TAG_SIZE:]
        if not hmac.compare_digest(tag, self._tag(self._in_dir, self._in_seq, body)):
            raise WireError("unauthorized", "bad authentication tag (wrong secret, or a "
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


# --- messages ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlanRequest:
    """A validated ``plan`` message.

    Attributes:
        id: Client's request id.
        obs: Shape ``(O,)`` float32 observation.
        obs_time: Client monotonic seconds when ``obs`` was taken.
        instruction: Free text ("" if none).
        deadline_s: Budget (s) from receipt; ``0`` means none.
        step: Simulation step of the observation (``-1`` when unknown).
    """

    id: int
    obs: np.ndarray
    obs_time: float
    instruction: str
    deadline_s: float
    step: int = -1
    #: ``plan_batch`` only: one instruction per row of ``obs`` (then ``obs`` is ``(n, O)``).
    instructions: tuple[str, ...] | None = None
    #: One of :data:`PRIORITIES`.
    priority: str = "robot"

    @property
    def rows(self) -> int:
        """Observations in the request (the unit of planner work)."""
        return 1 if self.instructions is None else len(self.instructions)


def _number(msg: dict, key: str, default: float | None = None) -> float:
    value = msg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise WireError("malformed", f"{key}: expected a finite number, got {_short(value)}")
    return float(value)


def _int(msg: dict, key: str, default: int | None = None) -> int:
    value = msg.get(key, default)
    if type(value) is not int or not -(1 << 63) <= value < (1 << 63):
        raise WireError("malformed", f"{key}: expected a 64-bit integer, got {_short(value)}")
    return value


def _priority(msg: dict, default: str) -> str:
    value = msg.get("priority", default)
    if value not in PRIORITIES:
        raise WireError("malformed", f"priority: expected one of {PRIORITIES}, got "
                                     f"{_short(value)}")
    return value


def parse_plan_request(msg: dict[str, Any], obs_dim: int | None = None) -> PlanRequest:
    """Validate a decoded ``plan`` message; raises :class:`WireError` naming the field."""
    req_id = _int(msg, "id")
    obs = decode_array(msg.get("obs"), "obs", ndim=1).astype(np.float32)
    if obs_dim is not None and obs.shape[0] != obs_dim:
        raise WireError("malformed", f"obs: expected {obs_dim} values, got {obs.shape[0]}")
    if not np.all(np.isfinite(obs)):
        raise WireError("malformed", "obs: contains NaN or inf")
    instruction = msg.get("instruction", "")
    if not isinstance(instruction, str) or len(instruction) > MAX_INSTRUCTION:
        raise WireError("malformed", f"instruction: expected a string of at most "
                                     f"{MAX_INSTRUCTION} characters")
    deadline_s = _number(msg, "deadline_s", 0.0)
    if deadline_s < 0:
        raise WireError("malformed", f"deadline_s: must be >= 0, got {deadline_s}")
    return PlanRequest(id=req_id, obs=obs, obs_time=_number(msg, "obs_time"),
                       instruction=instruction, deadline_s=deadline_s,
                       step=_int(msg, "step", -1), priority=_priority(msg, "robot"))


def parse_plan_batch_request(msg: dict[str, Any], obs_dim: int | None = None,
                             max_batch: int = 4096) -> PlanRequest:
    """Validate a ``plan_batch`` message (``obs (n, O)``, ``instructions`` list of n str)."""
    req_id = _int(msg, "id")
    obs = decode_array(msg.get("obs"), "obs", ndim=2).astype(np.float32)
    n = obs.shape[0]
    if not 1 <= n <= max_batch:
        raise WireError("malformed", f"obs: batch of {n} rows, expected 1..{max_batch}")
    if obs_dim is not None and obs.shape[1] != obs_dim:
        raise WireError("malformed", f"obs: expected {obs_dim} values per row, got {obs.shape[1]}")
    if not np.all(np.isfinite(obs)):
        raise WireError("malformed", "obs: contains NaN or inf")
    texts = msg.get("instructions")
    if not isinstance(texts, list) or len(texts) != n or not all(
            isinstance(t, str) and len(t) <= MAX_INSTRUCTION for t in texts):
        raise WireError("malformed", f"instructions: expected a list of {n} strings of at "
                                     f"most {MAX_INSTRUCTION} characters")
    deadline_s = _number(msg, "deadline_s", 0.0)
    if deadline_s < 0:
        raise WireError("malformed", f"deadline_s: must be >= 0, got {deadline_s}")
    return PlanRequest(id=req_id, obs=obs, obs_time=_number(msg, "obs_time"), instruction="",
                       deadline_s=deadline_s, instructions=tuple(texts),
                       priority=_priority(msg, "training"))


def batch_to_msg(req_id: int, actions: np.ndarray, dt: float, obs_time: float,
                 latency_s: float) -> dict[str, Any]:
    """The ``chunk_batch`` reply: ``actions (n, H, A)``, all rows starting at ``obs_time``."""
    return {"v": PROTOCOL_VERSION, "type": "chunk_batch", "id": req_id,
            "actions": encode_array(np.asarray(actions, dtype=np.float32)), "t0": obs_time,
            "dt": float(dt), "obs_time": obs_time, "latency_s": float(latency_s)}


def chunk_to_msg(req_id: int, chunk: ActionChunk, latency_s: float) -> dict[str, Any]:
    """The ``chunk`` reply for request ``req_id``."""
    return {"v": PROTOCOL_VERSION, "type": "chunk", "id": req_id,
            "actions": encode_array(chunk.actions), "t0": chunk.t0, "dt": chunk.dt,
            "step0": chunk.step0, "obs_time": chunk.obs_time, "source": chunk.source,
            "latency_s": float(latency_s)}


def chunk_from_msg(msg: dict[str, Any]) -> ActionChunk:
    """Build the :class:`ActionChunk` of a ``chunk`` reply; raises :class:`WireError`."""
    actions = decode_array(msg.get("actions"), "actions", ndim=2)
    source = msg.get("source", "remote")
    try:
        return ActionChunk(actions=actions.astype(np.float32), t0=_number(msg, "t0"),
                           dt=_number(msg, "dt"), step0=_int(msg, "step0", -1),
                           obs_time=_number(msg, "obs_time"), source=str(source),
                           meta={"latency_s": _number(msg, "latency_s", 0.0),
                                 "id": _int(msg, "id")})
    except ValueError as exc:  # ChunkError
        if isinstance(exc, WireError):
            raise
        raise WireError("malformed", f"chunk: {exc}") from exc


def error_msg(req_id: int, code: str, message: str) -> dict[str, Any]:
    """An ``error`` reply."""
    if code not in ERROR_CODES:
        raise ValueError(f"unknown error code {code!r}")
    return {"v": PROTOCOL_VERSION, "type": "error", "id": req_id, "code": code,
            "message": message}
