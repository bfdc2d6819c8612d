"""The planner-serving network protocol: length-prefixed msgpack frames, versioned, no
pickle.

This module holds the framing, arrays and error codes; :mod:`.auth` the HMAC frame tags,
:mod:`.messages` the message builders and validators.

A frame on the TCP stream is ``uint32 big-endian payload length`` followed by that many bytes
of msgpack. The payload is a map with at least ``"v"`` (protocol version, :data:`PROTOCOL_VERSION`)
and ``"type"``. Arrays travel as ``{"dtype": "float32", "shape": [...], "data": <bytes>}``
(little-endian, C order). msgpack extension types are refused, so nothing a peer sends can
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
* ``hello`` (authenticated servers only, optional, the client's first frame, tagged with the
  secret of the key it names): ``key_id`` (str): which of the server's named keys this
  client holds (see :mod:`.auth`); without it the shared secret applies. Answered by
  ``welcome``, or by an untagged ``unknown_key`` / ``unauthorized`` error (then closed).

Server -> client:

* ``chunk``: ``id``, ``actions`` (array ``(H, A)`` float32), ``t0``, ``dt``, ``step0``,
  ``obs_time``, ``source``, ``latency_s`` (server compute time); version 2: optional
  ``intent`` (array ``(I,)`` float32, the planner's intent vector).
* ``chunk_batch``: ``id``, ``actions`` (``(n, H, A)`` float32), ``t0``, ``dt``,
  ``obs_time``, ``latency_s``; version 2: optional ``intent`` (``(n, I)`` float32).
* ``health``: ``id``, ``state`` (``PlannerHealth`` value), ``info`` (PlannerInfo fields),
  ``metrics`` (counters and latency percentiles), ``versions`` (the protocol versions the
  server speaks; absent: 1 only).
* ``error``: ``id`` (``-1`` when unknown), ``code`` (one of :data:`ERROR_CODES`), ``message``.
* ``hello`` (authenticated servers only, the first frame, itself untagged): ``auth``
  (``"hmac-sha256"``), ``nonce`` (16 bytes).
* ``welcome`` (the answer to the client's ``hello``, tagged): ``key_id`` (absent for the
  shared secret), ``max_priority`` (the most urgent priority this client may claim).

Versions (:data:`SUPPORTED_VERSIONS`): version 2 adds the planner ``intent`` to ``chunk``
and ``chunk_batch``; nothing else differs. A message is stamped with the lowest version that
defines all it carries, so only a reply with an intent is a version 2 message. A server
answers a request in the request's version (a version 1 request never gets an intent, so a
version 1 client, which refuses every other version, keeps working); a client sends
version 2 requests only to a server whose health reply lists it (a version 1 server refuses
them), so either side may be the older one.

Authentication (:class:`FrameAuth`): with a shared secret every frame after ``hello`` carries a
32-byte tag after its msgpack body (the length prefix counts it):
``HMAC-SHA256(secret, nonce | direction | seq (uint64 BE) | body)``, direction ``b"C"`` from
the client and ``b"S"`` from the server, ``seq`` counting that direction's frames from 0. The
server's nonce binds the tags to one connection and ``seq`` to one position in it, so a frame
can be neither forged nor replayed nor reordered without the secret.

Named keys: a server may hold several secrets, each for one client identity with the most
urgent priority it may claim. The client names its key in a ``hello`` of its own, its first
frame: the body is plain msgpack (the key id travels in the clear) and the tag is made with
that key's secret, so the server reads the key id, then checks the tag with its secret, and
answers ``welcome``. An unknown key id is refused with ``unknown_key``, a request claiming a
priority above its key's maximum with ``priority_denied``. A client that sends no such
``hello`` uses the shared secret, as before.
"""

from __future__ import annotations

import math
import socket
import struct
from typing import Any

import msgpack
import numpy as np

__all__ = [
    "DEFAULT_MAX_FRAME",
    "BASE_VERSION",
    "ERROR_CODES",
    "HEADER",
    "MAX_INSTRUCTION",
    "PRIORITIES",
    "PROTOCOL_VERSION",
    "SUPPORTED_VERSIONS",
    "TAG_SIZE",
    "FrameReader",
    "FrameTooLarge",
    "ProtocolError",
    "decode_array",
    "decode_payload",
    "encode_array",
    "encode_frame",
    "recv_frame",
]

#: Newest version of this protocol (2: the planner intent in chunk replies).
PROTOCOL_VERSION = 2
#: Versions this side reads; a peer refuses any other with an ``unsupported_version`` error
#: reply (the connection stays open: framing is version independent).
SUPPORTED_VERSIONS = (1, 2)
#: The version a message is stamped with when nothing in it needs a newer one.
BASE_VERSION = 1
#: Frame header: payload length, uint32 big-endian.
HEADER = struct.Struct(">I")
#: Default largest accepted payload (bytes). A camera image would need more; raise it.
DEFAULT_MAX_FRAME = 1 << 20

#: Error codes a server may send.
ERROR_CODES = ("unsupported_version", "malformed", "frame_too_large", "unknown_type",
               "deadline_exceeded", "deadline_unmeetable", "superseded", "planner_error",
               "overloaded", "quota_exceeded", "unauthorized", "read_timeout", "idle_timeout",
               "auth_timeout", "shutting_down", "internal", "unknown_key", "priority_denied")
#: Request priorities, most urgent first: a robot waiting for its next chunk goes before a
#: training batch.
PRIORITIES = ("robot", "training")
#: Largest dimension and element count of an array in a message (a shape such as
#: ``[2**32, 2**32]`` is refused before any arithmetic can overflow).
MAX_ARRAY_ELEMENTS = 1 << 28
#: Longest accepted instruction text (characters).
MAX_INSTRUCTION = 1024
#: HMAC-SHA256 tag length (bytes) appended to authenticated frames.
TAG_SIZE = 32

_DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64,
           "uint8": np.uint8}


class ProtocolError(ValueError):
    """A payload does not follow the protocol; ``code`` is one of :data:`ERROR_CODES`."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class FrameTooLarge(ProtocolError):
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
        raise ProtocolError("malformed", f"dtype {name} cannot travel in a protocol message")
    data = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes()
    return {"dtype": name, "shape": list(a.shape), "data": data}


def decode_array(msg: Any, field: str, *, ndim: int | None = None) -> np.ndarray:
    """Inverse of :func:`encode_array`; raises :class:`ProtocolError` naming ``field``.

    Everything is checked before use: ``dtype`` a known name (not a list or a map), ``shape``
    a list of plain non-negative ints (``True`` is not a dimension) whose product, computed
    with Python integers, stays below :data:`MAX_ARRAY_ELEMENTS` and matches ``data``.
    """
    if not isinstance(msg, dict):
        raise ProtocolError("malformed", f"{field}: expected an array map, got "
                                         f"{type(msg).__name__}")
    dtype, shape, data = msg.get("dtype"), msg.get("shape"), msg.get("data")
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise ProtocolError("malformed", f"{field}.dtype: unsupported {_short(dtype)}")
    if (not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape)
            or (ndim is not None and len(shape) != ndim) or len(shape) > 8):
        raise ProtocolError("malformed", f"{field}.shape: expected {ndim or 'n'} non-negative "
                                         f"ints, got {_short(shape)}")
    count = math.prod(shape)
    if count > MAX_ARRAY_ELEMENTS:
        raise ProtocolError("malformed", f"{field}.shape: {shape} has {count} elements (limit "
                                         f"{MAX_ARRAY_ELEMENTS})")
    if not isinstance(data, bytes):
        raise ProtocolError("malformed", f"{field}.data: expected bytes")
    dt = np.dtype(_DTYPES[dtype]).newbyteorder("<")
    expected = count * dt.itemsize
    if len(data) != expected:
        raise ProtocolError("malformed", f"{field}.data: {len(data)} bytes for shape {shape} "
                                         f"{dtype} (expected {expected})")
    return np.frombuffer(data, dtype=dt).reshape(shape).astype(_DTYPES[dtype])


def _short(value: Any, limit: int = 60) -> str:
    """``repr`` cut to ``limit`` characters (error messages must stay small)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


# --- frames ------------------------------------------------------------------------------------
def _refuse_ext(code: int, data: bytes) -> Any:
    raise ProtocolError("malformed", f"msgpack extension type {code} is not allowed")


def encode_frame(payload: dict[str, Any]) -> bytes:
    """Header + msgpack bytes for one message (``"v"``, :data:`BASE_VERSION`, is added when
    missing)."""
    if "v" not in payload:
        payload = {"v": BASE_VERSION, **payload}
    body = msgpack.packb(payload, use_bin_type=True)
    return HEADER.pack(len(body)) + body


def decode_payload(body: bytes, *, max_frame: int = DEFAULT_MAX_FRAME,
                   max_items: int = 1 << 16) -> dict[str, Any]:
    """msgpack bytes -> message map, checking the version; raises :class:`ProtocolError`.

    ``max_items`` bounds every list (e.g. a ``plan_batch``'s instructions): msgpack checks
    it from the list's header, so an oversized batch is refused (``quota_exceeded``) before
    any of its items is decoded.
    """
    try:
        msg = msgpack.unpackb(body, raw=False, strict_map_key=True, ext_hook=_refuse_ext,
                              max_bin_len=max_frame, max_str_len=max_frame,
                              max_array_len=max_items, max_map_len=1 << 10)
    except ProtocolError:
        raise
    except ValueError as exc:
        if "max_array_len" in str(exc):
            raise ProtocolError("quota_exceeded", f"a list longer than {max_items} items "
                                                  f"(max_batch_rows): {exc}") from exc
        raise ProtocolError("malformed", f"not a msgpack document ({exc})") from exc
    except Exception as exc:  # msgpack raises several unrelated types for bad bytes
        raise ProtocolError("malformed",
                            f"not a msgpack document ({type(exc).__name__}: {exc})") from exc
    if not isinstance(msg, dict):
        raise ProtocolError("malformed", f"payload must be a map, got {type(msg).__name__}")
    version = msg.get("v")
    if type(version) is not int or version not in SUPPORTED_VERSIONS:
        raise ProtocolError("unsupported_version", f"protocol version {_short(version)} is "
                                                   "not supported (this side speaks "
                                                   f"{', '.join(map(str, SUPPORTED_VERSIONS))})")
    if not isinstance(msg.get("type"), str):
        raise ProtocolError("malformed", "payload.type: missing or not a string")
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
