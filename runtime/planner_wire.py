"""The planner-serving wire protocol: length-prefixed msgpack frames, versioned, no pickle.

A frame on the TCP stream is ``uint32 big-endian payload length`` followed by that many bytes
of msgpack. The payload is a map with at least ``"v"`` (protocol version, :data:`PROTOCOL_VERSION`)
and ``"type"``. Arrays travel as ``{"dtype": "float32", "shape": [...], "data": <bytes>}``
(little-endian, C order). msgpack extension types are refused, so nothing on the wire can
build an arbitrary Python object. See ``docs/planner.md`` for the full message list.

Client -> server:

* ``plan``: ``id`` (int), ``obs`` (array, ``(O,)`` float32), ``obs_time`` (client monotonic
  seconds when the observation was taken), ``instruction`` (str), ``deadline_s`` (budget in
  seconds from the server's receipt; ``0`` = none), optional ``step`` (int, sim step index).
* ``plan_batch``: ``id``, ``obs`` (``(n, O)``), ``instructions`` (n str), ``obs_time``,
  ``deadline_s``: many observations in one request (a training-time planner service
  answering all simulated envs at once); only for planners with ``plan_batch``.
* ``health``: ``id``.

Server -> client:

* ``chunk``: ``id``, ``actions`` (array ``(H, A)`` float32), ``t0``, ``dt``, ``step0``,
  ``obs_time``, ``source``, ``latency_s`` (server compute time).
* ``chunk_batch``: ``id``, ``actions`` (``(n, H, A)`` float32), ``t0``, ``dt``,
  ``obs_time``, ``latency_s``.
* ``health``: ``id``, ``state`` (``PlannerHealth`` value), ``info`` (PlannerInfo fields),
  ``metrics`` (counters and latency percentiles).
* ``error``: ``id`` (``-1`` when unknown), ``code`` (one of :data:`ERROR_CODES`), ``message``.
"""

from __future__ import annotations

import math
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
    "FrameReader",
    "FrameTooLarge",
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
               "deadline_exceeded", "superseded", "planner_error", "overloaded")

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
    """Inverse of :func:`encode_array`; raises :class:`WireError` naming ``field``."""
    if not isinstance(msg, dict):
        raise WireError("malformed", f"{field}: expected an array map, got {type(msg).__name__}")
    dtype, shape, data = msg.get("dtype"), msg.get("shape"), msg.get("data")
    if dtype not in _DTYPES:
        raise WireError("malformed", f"{field}.dtype: unsupported {dtype!r}")
    if (not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape)
            or (ndim is not None and len(shape) != ndim)):
        raise WireError("malformed", f"{field}.shape: expected {ndim or 'n'} non-negative "
                                     f"ints, got {shape!r}")
    if not isinstance(data, bytes):
        raise WireError("malformed", f"{field}.data: expected bytes")
    dt = np.dtype(_DTYPES[dtype]).newbyteorder("<")
    expected = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if len(data) != expected:
        raise WireError("malformed", f"{field}.data: {len(data)} bytes for shape {shape} "
                                     f"{dtype} (expected {expected})")
    return np.frombuffer(data, dtype=dt).reshape(shape).astype(_DTYPES[dtype])


# --- frames ------------------------------------------------------------------------------------
def _refuse_ext(code: int, data: bytes) -> Any:
    raise WireError("malformed", f"msgpack extension type {code} is not allowed")


def encode_frame(payload: dict[str, Any]) -> bytes:
    """Header + msgpack bytes for one message (``"v"`` is added when missing)."""
    if "v" not in payload:
        payload = {"v": PROTOCOL_VERSION, **payload}
    body = msgpack.packb(payload, use_bin_type=True)
    return HEADER.pack(len(body)) + body


def decode_payload(body: bytes, *, max_frame: int = DEFAULT_MAX_FRAME) -> dict[str, Any]:
    """msgpack bytes -> message map, checking the version; raises :class:`WireError`."""
    try:
        msg = msgpack.unpackb(body, raw=False, strict_map_key=True, ext_hook=_refuse_ext,
                              max_bin_len=max_frame, max_str_len=max_frame,
                              max_array_len=1 << 16, max_map_len=1 << 10)
    except WireError:
        raise
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


def _number(msg: dict, key: str, default: float | None = None) -> float:
    value = msg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise WireError("malformed", f"{key}: expected a finite number, got {value!r}")
    return float(value)


def _int(msg: dict, key: str, default: int | None = None) -> int:
    value = msg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise WireError("malformed", f"{key}: expected an integer, got {value!r}")
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
    if not isinstance(instruction, str):
        raise WireError("malformed", "instruction: expected a string")
    deadline_s = _number(msg, "deadline_s", 0.0)
    if deadline_s < 0:
        raise WireError("malformed", f"deadline_s: must be >= 0, got {deadline_s}")
    return PlanRequest(id=req_id, obs=obs, obs_time=_number(msg, "obs_time"),
                       instruction=instruction, deadline_s=deadline_s,
                       step=_int(msg, "step", -1))


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
    if not isinstance(texts, list) or len(texts) != n or not all(isinstance(t, str)
                                                                 for t in texts):
        raise WireError("malformed", f"instructions: expected a list of {n} strings")
    deadline_s = _number(msg, "deadline_s", 0.0)
    if deadline_s < 0:
        raise WireError("malformed", f"deadline_s: must be >= 0, got {deadline_s}")
    return PlanRequest(id=req_id, obs=obs, obs_time=_number(msg, "obs_time"), instruction="",
                       deadline_s=deadline_s, instructions=tuple(texts))


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
