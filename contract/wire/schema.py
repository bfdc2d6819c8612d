"""The serial wire schema: the single source of truth for the Python codec and the C header.

Every message has an id, a direction and fixed-size little-endian fields. The C header
``firmware/include/edgerl_msgs.h`` is generated from :data:`MESSAGES` by
:mod:`edgerl.contract.wire.gen_c`; the Python codec (:mod:`edgerl.contract.wire.codec`) builds its
``struct``
formats from the same objects. :func:`schema_hash` (MAVLink's CRC_EXTRA idea, over the whole
schema) is exchanged in HELLO/HELLO_ACK and a mismatch refuses the link.

Units: times are microseconds of the sender's monotonic clock, truncated to ``uint32``
(they wrap every ~71.6 minutes; compare them with modular arithmetic). Joint commands and
plant states are float32 in the units of the bundle's action / observation layout
(``manifest.json``); the firmware does not rescale them.
"""

from __future__ import annotations

import enum
import json
import zlib
from dataclasses import dataclass

from edgerl.contract.chunk import MAX_INTENT

__all__ = [
    "CLEAR_ESTOP_TOKEN",
    "MAX_CHUNK_FLOATS",
    "MAX_CMD",
    "MAX_INTENT",
    "MAX_STATE",
    "MESSAGES",
    "NO_ROW",
    "PROTOCOL_VERSION",
    "TYPES",
    "Field",
    "Message",
    "Mode",
    "SafeAction",
    "message_by_id",
    "message_by_name",
    "schema_hash",
    "schema_json",
]

#: Bump when framing or message semantics change (field changes change the hash anyway).
PROTOCOL_VERSION = 1
#: Maximum joints per setpoint / actuator command.
MAX_CMD = 8
#: Maximum plant-state floats per STATE / SENSOR message.
MAX_STATE = 16
#: Most action floats (rows x joints) one CHUNK carries (with the planner intent's
#: ``MAX_INTENT`` floats, they fill the 255-byte payload: 50 since the intent, 56 before).
MAX_CHUNK_FLOATS = 50
#: EDIT_TICK.row when no usable chunk row exists (no chunk yet, or stale).
NO_ROW = 0xFF
#: CLEAR_ESTOP must carry this token: a random bit flip cannot clear an e-stop.
CLEAR_ESTOP_TOKEN = 0x5AFE0C1E

#: wire type -> (struct code, size in bytes, C type)
TYPES: dict[str, tuple[str, int, str]] = {
    "u8": ("B", 1, "uint8_t"),
    "u16": ("H", 2, "uint16_t"),
    "u32": ("I", 4, "uint32_t"),
    "i32": ("i", 4, "int32_t"),
    "f32": ("f", 4, "float"),
}


class Mode(enum.IntEnum):
    """Firmware operating mode (STATUS.mode, STATE.mode, ACTUATOR.mode)."""

    IDLE = 0  # no valid setpoint yet since boot: outputs the safe action
    ACTIVE = 1  # applying host setpoints
    SAFE = 2  # watchdog tripped: safe action until the next valid SETPOINT
    ESTOP = 3  # latched e-stop: zero output until CLEAR_ESTOP (survives reconnects)
    LOCAL_POLICY = 4  # on-MCU policy (policy.h) drives the actuators; host heartbeats
    FAST_LOOP = 5  # on-MCU edit policy (edit_policy.h) at its own rate over host CHUNKs


class SafeAction(enum.IntEnum):
    """What the firmware outputs in IDLE / SAFE."""

    ZERO = 0  # all commands 0
    HOLD = 1  # hold the last applied command


@dataclass(frozen=True)
class Field:
    """One fixed-size field. ``count > 1`` makes a fixed array (unused tail is zero)."""

    name: str
    type: str
    count: int = 1
    unit: str = ""
    doc: str = ""

    @property
    def size(self) -> int:
        return TYPES[self.type][1] * self.count


@dataclass(frozen=True)
class Message:
    """A message: ``id`` (1 byte on the wire), direction, fields in wire order."""

    name: str
    id: int
    direction: str  # "host->fw", "fw->host", "both", "plant->fw", "fw->plant"
    fields: tuple[Field, ...]
    doc: str = ""

    @property
    def size(self) -> int:
        """Payload size in bytes."""
        return sum(f.size for f in self.fields)

    @property
    def struct_format(self) -> str:
        """``struct`` format (little-endian, no padding) of the payload."""
        return "<" + "".join(f"{f.count}{TYPES[f.type][0]}" for f in self.fields)


def _f(name: str, typ: str, count: int = 1, unit: str = "", doc: str = "") -> Field:
    return Field(name, typ, count, unit, doc)


MESSAGES: tuple[Message, ...] = (
    Message("HELLO", 0x01, "host->fw", (
        _f("schema_hash", "u32", doc="schema_hash() of the host's codec"),
        _f("proto_version", "u16", doc="PROTOCOL_VERSION of the host"),
        _f("host_time_us", "u32", unit="us", doc="host monotonic time"),
    ), "Connect request. The firmware answers HELLO_ACK; accepted=0 on a hash mismatch."),
    Message("HELLO_ACK", 0x02, "fw->host", (
        _f("schema_hash", "u32", doc="the firmware's EDGERL_SCHEMA_HASH"),
        _f("proto_version", "u16"),
        _f("accepted", "u8", doc="1 if hash and version match, else 0 (link refused)"),
        _f("mode", "u8", doc="Mode"),
        _f("n_cmd", "u8", doc="joints the firmware drives"),
        _f("has_policy", "u8", doc="1 if built with an on-MCU policy.h"),
        _f("watchdog_ms", "u16", unit="ms"),
        _f("fw_time_us", "u32", unit="us"),
    ), "Connect answer; also tells the host if an e-stop is latched (mode=ESTOP)."),
    Message("SETPOINT", 0x10, "host->fw", (
        _f("seq", "u32", doc="setpoint sequence number (host counter, increasing)"),
        _f("host_time_us", "u32", unit="us", doc="host time when sent; echoed in STATE"),
        _f("n", "u8", doc="joints used (<= MAX_CMD)"),
        _f("q", "f32", MAX_CMD, unit="action units",
           doc="absolute per-joint commands (idempotent: re-sending is harmless)"),
    ), "Absolute joint command. Feeds the watchdog; resumes ACTIVE from IDLE/SAFE."),
    Message("STATE", 0x11, "fw->host", (
        _f("fw_time_us", "u32", unit="us"),
        _f("setpoint_seq", "u32", doc="seq of the last applied SETPOINT"),
        _f("host_time_us", "u32", unit="us", doc="that SETPOINT's host_time_us (for RTT)"),
        _f("sensor_age_us", "u32", unit="us", doc="age of the plant state below"),
        _f("mode", "u8", doc="Mode"),
        _f("n_state", "u8"),
        _f("state", "f32", MAX_STATE, unit="observation units", doc="plant state echo"),
        _f("n_cmd", "u8"),
        _f("cmd", "f32", MAX_CMD, unit="action units", doc="command now applied"),
    ), "Sent after every applied SETPOINT, once per new plant state (sensor sample), and at "
       "the state rate without either."),
    Message("HEARTBEAT", 0x12, "both", (
        _f("time_us", "u32", unit="us"),
    ), "Keep-alive. From the host it feeds the watchdog but does not leave SAFE."),
    Message("ESTOP", 0x13, "host->fw", (
        _f("reason", "u8"),
    ), "Latch the e-stop: zero output, setpoints ignored, until CLEAR_ESTOP."),
    Message("CLEAR_ESTOP", 0x14, "host->fw", (
        _f("token", "u32", doc="must equal CLEAR_ESTOP_TOKEN"),
    ), "Clear a latched e-stop; the firmware goes to SAFE and needs a new SETPOINT."),
    Message("STATUS", 0x15, "fw->host", (
        _f("fw_time_us", "u32", unit="us"),
        _f("mode", "u8", doc="Mode"),
        _f("safe_action", "u8", doc="SafeAction"),
        _f("estop_latched", "u8"),
        _f("rx_frames", "u32", doc="valid frames received"),
        _f("bad_frames", "u32", doc="frames rejected (COBS/length/CRC/id/size)"),
        _f("lost_frames", "u32", doc="gaps in the received link sequence numbers"),
        _f("watchdog_trips", "u32"),
        _f("setpoints_applied", "u32"),
        _f("setpoints_rejected", "u32", doc="ignored (e-stop, bad n, non-finite)"),
        _f("estops", "u32", doc="e-stop latches since boot"),
        _f("last_setpoint_seq", "u32"),
        _f("safe_entry_us", "u32", unit="us",
           doc="last watchdog trip: time from the last valid command to the safe output"),
        _f("request_us", "u32", unit="us",
           doc="GET_STATUS.host_time_us this answers (0: periodic or event STATUS)"),
        _f("safe_entry_late_us", "u32", unit="us",
           doc="of safe_entry_us: how late the timer wake that ran the tripping poll came "
               "past its due time (an MCU: its interrupt latency; an emulator: the host's "
               "timer delivery; 1000: a whole tick or more)"),
    ), "Counters; sent on GET_STATUS, on every mode change and periodically."),
    Message("GET_STATUS", 0x16, "host->fw", (
        _f("host_time_us", "u32", unit="us"),
    ), "Ask for a STATUS now."),
    Message("SET_MODE", 0x17, "host->fw", (
        _f("mode", "u8", doc="Mode.ACTIVE (host setpoints), Mode.LOCAL_POLICY or "
                             "Mode.FAST_LOOP"),
    ), "Switch to the on-MCU policy / fast loop (if built with one) or back to host "
       "setpoints."),
    Message("CHUNK", 0x18, "host->fw", (
        _f("step0", "u32", doc="the chunk's step0 (planner step of row 0; orders chunks)"),
        _f("host_time_us", "u32", unit="us",
           doc="host time when sent: the firmware maps the times below to its clock by "
               "fw_now - host_time_us at receipt"),
        _f("t0_us", "u32", unit="us", doc="host time of row 0"),
        _f("dt_us", "u32", unit="us", doc="time between rows (> 0)"),
        _f("obs_time_us", "u32", unit="us",
           doc="host time of the planner's observation (chunk age reference)"),
        _f("horizon", "u8", doc="rows H (H * n <= MAX_CHUNK_FLOATS)"),
        _f("n", "u8", doc="joints per row (= the firmware's n_cmd)"),
        _f("actions", "f32", MAX_CHUNK_FLOATS, unit="action units",
           doc="row-major (H, n) chunk actions"),
        _f("intent_n", "u8", doc="planner intent values used (0: none; <= MAX_INTENT)"),
        _f("intent", "f32", MAX_INTENT,
           doc="the planner's intent vector (edit_obs.intent_dim of the edit policy)"),
    ), "Action chunk for the fast loop, with the planner's intent; feeds the watchdog. A "
       "chunk with an older step0 than the current one is refused."),
    Message("EDIT_TICK", 0x19, "fw->host", (
        _f("fw_time_us", "u32", unit="us", doc="the tick's firmware time"),
        _f("tick", "u32", doc="edit ticks since FAST_LOOP was entered"),
        _f("chunk_step0", "u32", doc="step0 of the chunk used"),
        _f("row", "u8", doc="chunk row used (NO_ROW: none usable)"),
        _f("has_chunk", "u8"),
        _f("compute_us", "u32", unit="us", doc="firmware time the tick's computation took"),
        _f("chunks_rx", "u32", doc="CHUNKs accepted since boot"),
        _f("chunks_rejected", "u32", doc="CHUNKs refused (size, non-finite, older)"),
        _f("n_cmd", "u8"),
        _f("cmd", "f32", MAX_CMD, unit="action units", doc="command applied"),
    ), "Fast-loop telemetry, one per edit tick."),
    Message("SENSOR", 0x20, "plant->fw", (
        _f("plant_time_us", "u32", unit="us"),
        _f("n", "u8"),
        _f("state", "f32", MAX_STATE, unit="observation units"),
    ), "Plant state into the firmware's sensor HAL (HIL: the harness writes it)."),
    Message("ACTUATOR", 0x21, "fw->plant", (
        _f("fw_time_us", "u32", unit="us"),
        _f("mode", "u8"),
        _f("n", "u8"),
        _f("cmd", "f32", MAX_CMD, unit="action units"),
    ), "The firmware's actuator output (HIL: the harness applies it to the plant)."),
)

_BY_ID = {m.id: m for m in MESSAGES}
_BY_NAME = {m.name: m for m in MESSAGES}


def message_by_id(msg_id: int) -> Message | None:
    """The message with this id, or None."""
    return _BY_ID.get(msg_id)


def message_by_name(name: str) -> Message:
    """The message called ``name``; KeyError names the unknown message."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown wire message {name!r}; known: {sorted(_BY_NAME)}") from None


def schema_json() -> str:
    """Canonical JSON of the schema (what the hash covers; docs and units included)."""
    doc = {
        "protocol_version": PROTOCOL_VERSION,
        "max_cmd": MAX_CMD,
        "max_chunk_floats": MAX_CHUNK_FLOATS,
        "max_intent": MAX_INTENT,
        "max_state": MAX_STATE,
        "messages": [
            {"name": m.name, "id": m.id, "direction": m.direction,
             "fields": [[f.name, f.type, f.count, f.unit] for f in m.fields]}
            for m in MESSAGES
        ],
    }
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def schema_hash() -> int:
    """CRC-32 of :func:`schema_json` (uint32): equal on both ends or the link is refused."""
    return zlib.crc32(schema_json().encode()) & 0xFFFFFFFF


def _check_schema() -> None:
    ids = [m.id for m in MESSAGES]
    if len(set(ids)) != len(ids) or len(_BY_NAME) != len(MESSAGES):
        raise ValueError("duplicate message id or name in the wire schema")
    for m in MESSAGES:
        if not 0 < m.id < 256 or m.size > 255:
            raise ValueError(f"message {m.name}: id must be 1..255 and payload <= 255 bytes")
        for f in m.fields:
            if f.type not in TYPES:
                raise ValueError(f"message {m.name}.{f.name}: unknown type {f.type!r}")


_check_schema()
