"""Framing: COBS + 0x00 delimiter around ``id | seq | len | payload | crc16``.

Raw frame (before COBS), little-endian::

    msg_id u8 | seq u16 | len u8 | payload[len] | crc16 u16

``crc16`` is CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF) over everything before it. The
raw frame is COBS-encoded (no zero bytes inside) and terminated by one 0x00. A receiver
accepts a frame only if COBS decodes, ``len`` matches the decoded size, the CRC matches, the
id is in the schema and ``len`` is at most that message's payload size; anything else is one
bad frame. Senders drop trailing zero bytes of the payload (MAVLink v2 payload truncation,
:func:`encode_message_frame`) and receivers zero-fill it back, so a one-joint SETPOINT is
short on the wire and less likely to be hit by line noise. :class:`FrameParser` is
streaming: it resynchronises at the next 0x00 after garbage, counts what it rejects and
never raises on input bytes.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass, fields

from edgerl.contract.wire.schema import MESSAGES

__all__ = [
    "HEADER_SIZE",
    "MAX_ENCODED",
    "MAX_PAYLOAD",
    "OVERHEAD",
    "Frame",
    "FrameParser",
    "ParserStats",
    "cobs_decode",
    "cobs_encode",
    "crc16",
    "encode_frame",
    "encode_message_frame",
]

HEADER_SIZE = 4  # id, seq(2), len
OVERHEAD = HEADER_SIZE + 2  # + crc16
MAX_PAYLOAD = 255
#: Largest COBS-encoded frame without its delimiter.
MAX_ENCODED = OVERHEAD + MAX_PAYLOAD + (OVERHEAD + MAX_PAYLOAD) // 254 + 1

_SIZES: dict[int, int] = {m.id: m.size for m in MESSAGES}


def crc16(data: bytes, init: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE of ``data`` (``crc16(b"123456789") == 0x29B1``)."""
    return binascii.crc_hqx(data, init)


def cobs_encode(data: bytes) -> bytes:
    """COBS-encode ``data`` (output has no 0x00; the caller appends the delimiter)."""
    out = bytearray()
    for part in bytes(data).split(b"\x00"):
        while len(part) >= 254:
            out.append(0xFF)
            out += part[:254]
            part = part[254:]
        out.append(len(part) + 1)
        out += part
    return bytes(out)


def cobs_decode(data: bytes) -> bytes | None:
    """Decode one COBS block (without delimiter); None if malformed (a 0x00 inside or a
    block running past the end)."""
    out = bytearray()
    n = len(data)
    i = 0
    while i < n:
        code = data[i]
        if code == 0 or i + code > n:
            return None
        out += data[i + 1:i + code]
        i += code
        if code < 0xFF and i < n:
            out.append(0)
    return bytes(out)


def encode_frame(msg_id: int, seq: int, payload: bytes) -> bytes:
    """A complete wire frame: COBS(id|seq|len|payload|crc) + 0x00."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    if not 0 <= msg_id < 256:
        raise ValueError(f"message id {msg_id} does not fit in a byte")
    seq &= 0xFFFF
    raw = bytes((msg_id, seq & 0xFF, seq >> 8, len(payload))) + bytes(payload)
    crc = crc16(raw)
    return cobs_encode(raw + bytes((crc & 0xFF, crc >> 8))) + b"\x00"


def encode_message_frame(msg_id: int, seq: int, payload: bytes) -> bytes:
    """Like :func:`encode_frame`, with the payload's trailing zero bytes dropped."""
    return encode_frame(msg_id, seq, bytes(payload).rstrip(b"\x00"))


@dataclass(frozen=True)
class Frame:
    """One accepted frame."""

    msg_id: int
    seq: int
    payload: bytes


@dataclass
class ParserStats:
    """Counters of a :class:`FrameParser` (``bad_frames`` is the sum of the ``bad_*``)."""

    frames_ok: int = 0
    bad_frames: int = 0
    bad_cobs: int = 0
    bad_length: int = 0
    bad_crc: int = 0
    bad_id: int = 0
    bad_size: int = 0
    overflow: int = 0
    lost_frames: int = 0
    bytes_in: int = 0

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class FrameParser:
    """Streaming frame parser: ``feed(bytes) -> list[Frame]``; never raises on input.

    Args:
        sizes: msg id -> payload size accepted (default: the wire schema). Pass ``None`` to
            accept any id/size with a good CRC (used for fuzzing the framing alone).
        max_encoded: frames longer than this (before the delimiter) count as ``overflow``
            and the parser skips to the next 0x00.
    """

    def __init__(self, sizes: dict[int, int] | None = _SIZES,
                 max_encoded: int = MAX_ENCODED) -> None:
        self.sizes = sizes
        self.max_encoded = max_encoded
        self.stats = ParserStats()
        self._buf = bytearray()
        self._overflowed = False
        self._last_seq: int | None = None

    def reset_sequence(self) -> None:
        """Forget the last sequence number (after a reconnect) so no loss is counted."""
        self._last_seq = None

    def reset(self) -> None:
        """Drop any partial frame and forget the sequence (counters are kept)."""
        self._buf.clear()
        self._overflowed = False
        self._last_seq = None

    def feed(self, data: bytes) -> list[Frame]:
        """Consume ``data``; returns the frames completed by it, in order."""
        self.stats.bytes_in += len(data)
        out: list[Frame] = []
        parts = bytes(data).split(b"\x00")
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if not self._overflowed:
                self._buf += part
                if len(self._buf) > self.max_encoded:
                    self._overflowed = True
                    self._buf.clear()
            if last:
                break
            # a delimiter ends the current frame
            if self._overflowed:
                self._bad("overflow")
                self._overflowed = False
            elif self._buf:
                frame = self._decode(bytes(self._buf))
                if frame is not None:
                    out.append(frame)
            self._buf.clear()
        return out

    def _bad(self, reason: str) -> None:
        self.stats.bad_frames += 1
        setattr(self.stats, reason, getattr(self.stats, reason) + 1)

    def _decode(self, block: bytes) -> Frame | None:
        raw = cobs_decode(block)
        if raw is None:
            self._bad("bad_cobs")
            return None
        if len(raw) < OVERHEAD or raw[3] != len(raw) - OVERHEAD:
            self._bad("bad_length")
            return None
        if crc16(raw[:-2]) != raw[-2] | (raw[-1] << 8):
            self._bad("bad_crc")
            return None
        msg_id = raw[0]
        payload = raw[HEADER_SIZE:-2]
        if self.sizes is not None:
            size = self.sizes.get(msg_id)
            if size is None:
                self._bad("bad_id")
                return None
            if raw[3] > size:
                self._bad("bad_size")
                return None
            payload += bytes(size - raw[3])  # senders drop trailing zero bytes
        seq = raw[1] | (raw[2] << 8)
        if self._last_seq is not None:
            gap = (seq - self._last_seq - 1) & 0xFFFF
            if gap < 0x8000:
                self.stats.lost_frames += gap
        self._last_seq = seq
        self.stats.frames_ok += 1
        return Frame(msg_id, seq, payload)
