"""Message codec built from :mod:`edgerl.contract.wire.schema` (the C side is generated from it).

``encode("SETPOINT", seq, seq=..., q=[...])`` returns a complete frame; ``decode(frame)``
returns a :class:`Msg` whose ``fields`` hold ints/floats, and tuples for array fields.
Array fields may be given shorter than their size; the tail is zero-filled.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any

from edgerl.contract.wire.framing import Frame, encode_message_frame
from edgerl.contract.wire.schema import MESSAGES, Message, message_by_id, message_by_name

__all__ = ["Msg", "decode", "encode", "encode_payload"]

_STRUCTS: dict[int, struct.Struct] = {m.id: struct.Struct(m.struct_format) for m in MESSAGES}


@dataclass(frozen=True)
class Msg:
    """A decoded message: schema ``name``, link ``seq`` and field values by name."""

    name: str
    seq: int
    fields: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]


def _flatten(msg: Message, values: dict[str, Any]) -> list[Any]:
    unknown = set(values) - {f.name for f in msg.fields}
    if unknown:
        raise ValueError(f"{msg.name}: unknown field(s) {sorted(unknown)}")
    flat: list[Any] = []
    for f in msg.fields:
        v = values.get(f.name, 0 if f.count == 1 else ())
        if f.count == 1:
            flat.append(float(v) if f.type == "f32" else int(v))
            continue
        try:
            seq = [float(x) for x in v] if f.type == "f32" else [int(x) for x in v]
        except TypeError:
            raise ValueError(f"{msg.name}.{f.name}: expected a sequence of {f.count}") from None
        if len(seq) > f.count:
            raise ValueError(f"{msg.name}.{f.name}: {len(seq)} values, at most {f.count}")
        flat.extend(seq + [0] * (f.count - len(seq)))
    return flat


def encode_payload(name: str, /, **values: Any) -> bytes:
    """The payload bytes of message ``name`` (missing fields are 0)."""
    msg = message_by_name(name)
    try:
        return _STRUCTS[msg.id].pack(*_flatten(msg, values))
    except struct.error as exc:
        raise ValueError(f"{msg.name}: field out of range ({exc})") from None


def encode(name: str, link_seq: int, /, **values: Any) -> bytes:
    """A complete frame (COBS + delimiter) carrying message ``name`` with link sequence
    number ``link_seq`` (fields may be called ``seq`` too)."""
    return encode_message_frame(message_by_name(name).id, link_seq,
                                encode_payload(name, **values))


def decode(frame: Frame) -> Msg | None:
    """The message in an accepted frame; None if the id/size is not in the schema."""
    msg = message_by_id(frame.msg_id)
    if msg is None or len(frame.payload) != msg.size:
        return None
    flat = _STRUCTS[msg.id].unpack(frame.payload)
    out: dict[str, Any] = {}
    i = 0
    for f in msg.fields:
        if f.count == 1:
            out[f.name] = flat[i]
        else:
            out[f.name] = flat[i:i + f.count]
        i += f.count
    return Msg(msg.name, frame.seq, out)


def finite(values: Any) -> bool:
    """True if every value is a finite float (firmware rejects non-finite setpoints)."""
    return all(math.isfinite(float(v)) for v in values)
