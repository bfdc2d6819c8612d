"""Serial wire format shared by the runtime, the HIL harness and (generated) the firmware."""

from __future__ import annotations

from edgerl.contract.wire.codec import Msg, decode, encode, encode_payload
from edgerl.contract.wire.framing import (
    Frame,
    FrameParser,
    ParserStats,
    cobs_decode,
    cobs_encode,
    crc16,
    encode_frame,
)
from edgerl.contract.wire.schema import (
    CLEAR_ESTOP_TOKEN,
    MAX_CHUNK_FLOATS,
    MAX_CMD,
    MAX_INTENT,
    MAX_STATE,
    MESSAGES,
    NO_ROW,
    PROTOCOL_VERSION,
    Mode,
    SafeAction,
    message_by_id,
    message_by_name,
    schema_hash,
)

__all__ = [
    "CLEAR_ESTOP_TOKEN",
    "MAX_CHUNK_FLOATS",
    "MAX_CMD",
    "MAX_INTENT",
    "MAX_STATE",
    "MESSAGES",
    "NO_ROW",
    "PROTOCOL_VERSION",
    "Frame",
    "FrameParser",
    "Mode",
    "Msg",
    "ParserStats",
    "SafeAction",
    "cobs_decode",
    "cobs_encode",
    "crc16",
    "decode",
    "encode",
    "encode_frame",
    "encode_payload",
    "message_by_id",
    "message_by_name",
    "schema_hash",
]
