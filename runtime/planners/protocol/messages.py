"""Planner protocol messages: validated ``plan`` / ``plan_batch`` requests and the replies.

Each parser checks every field before use and raises :class:`~.framing.ProtocolError` naming
it; the message list and the versions are in :mod:`.framing` and ``docs/planner.md``. A reply
is built for the version of the request it answers: the planner intent travels only in a
version 2 reply (:func:`chunk_to_msg`, :func:`batch_to_msg`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgerl.contract.chunk import MAX_INTENT, ActionChunk
from edgerl.runtime.planners.protocol.framing import (
    BASE_VERSION,
    ERROR_CODES,
    MAX_INSTRUCTION,
    PRIORITIES,
    SUPPORTED_VERSIONS,
    ProtocolError,
    _short,
    decode_array,
    encode_array,
)

__all__ = [
    "INTENT_VERSION",
    "PlanRequest",
    "batch_intent_from_msg",
    "batch_to_msg",
    "chunk_from_msg",
    "chunk_to_msg",
    "error_msg",
    "negotiated_version",
    "parse_plan_batch_request",
    "parse_plan_request",
]

#: The first protocol version whose chunk replies carry the planner intent.
INTENT_VERSION = 2


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
    #: The request's protocol version (its reply is built for it).
    version: int = BASE_VERSION

    @property
    def rows(self) -> int:
        """Observations in the request (the unit of planner work)."""
        return 1 if self.instructions is None else len(self.instructions)


def _number(msg: dict, key: str, default: float | None = None) -> float:
    value = msg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ProtocolError("malformed", f"{key}: expected a finite number, got {_short(value)}")
    return float(value)


def _int(msg: dict, key: str, default: int | None = None) -> int:
    value = msg.get(key, default)
    if type(value) is not int or not -(1 << 63) <= value < (1 << 63):
        raise ProtocolError("malformed", f"{key}: expected a 64-bit integer, got {_short(value)}")
    return value


def _priority(msg: dict, default: str) -> str:
    value = msg.get("priority", default)
    if value not in PRIORITIES:
        raise ProtocolError("malformed", f"priority: expected one of {PRIORITIES}, got "
                                         f"{_short(value)}")
    return value


def _version(msg: dict) -> int:
    """The message's version (``decode_payload`` has checked it; a hand-built map without one
    is the base version)."""
    version = msg.get("v", BASE_VERSION)
    return version if type(version) is int else BASE_VERSION


def parse_plan_request(msg: dict[str, Any], obs_dim: int | None = None) -> PlanRequest:
    """Validate a decoded ``plan`` message; raises :class:`ProtocolError` naming the field."""
    req_id = _int(msg, "id")
    obs = decode_array(msg.get("obs"), "obs", ndim=1).astype(np.float32)
    if obs_dim is not None and obs.shape[0] != obs_dim:
        raise ProtocolError("malformed", f"obs: expected {obs_dim} values, got {obs.shape[0]}")
    if not np.all(np.isfinite(obs)):
        raise ProtocolError("malformed", "obs: contains NaN or inf")
    instruction = msg.get("instruction", "")
    if not isinstance(instruction, str) or len(instruction) > MAX_INSTRUCTION:
        raise ProtocolError("malformed", f"instruction: expected a string of at most "
                                         f"{MAX_INSTRUCTION} characters")
    deadline_s = _number(msg, "deadline_s", 0.0)
    if deadline_s < 0:
        raise ProtocolError("malformed", f"deadline_s: must be >= 0, got {deadline_s}")
    return PlanRequest(id=req_id, obs=obs, obs_time=_number(msg, "obs_time"),
                       instruction=instruction, deadline_s=deadline_s,
                       step=_int(msg, "step", -1), priority=_priority(msg, "robot"),
                       version=_version(msg))


def parse_plan_batch_request(msg: dict[str, Any], obs_dim: int | None = None,
                             max_batch: int = 4096) -> PlanRequest:
    """Validate a ``plan_batch`` message (``obs (n, O)``, ``instructions`` list of n str)."""
    req_id = _int(msg, "id")
    obs = decode_array(msg.get("obs"), "obs", ndim=2).astype(np.float32)
    n = obs.shape[0]
    if not 1 <= n <= max_batch:
        raise ProtocolError("malformed", f"obs: batch of {n} rows, expected 1..{max_batch}")
    if obs_dim is not None and obs.shape[1] != obs_dim:
        raise ProtocolError("malformed", f"obs: expected {obs_dim} values per row, got "
                                         f"{obs.shape[1]}")
    if not np.all(np.isfinite(obs)):
        raise ProtocolError("malformed", "obs: contains NaN or inf")
    texts = msg.get("instructions")
    if not isinstance(texts, list) or len(texts) != n or not all(
            isinstance(t, str) and len(t) <= MAX_INSTRUCTION for t in texts):
        raise ProtocolError("malformed", f"instructions: expected a list of {n} strings of at "
                                         f"most {MAX_INSTRUCTION} characters")
    deadline_s = _number(msg, "deadline_s", 0.0)
    if deadline_s < 0:
        raise ProtocolError("malformed", f"deadline_s: must be >= 0, got {deadline_s}")
    return PlanRequest(id=req_id, obs=obs, obs_time=_number(msg, "obs_time"), instruction="",
                       deadline_s=deadline_s, instructions=tuple(texts),
                       priority=_priority(msg, "training"), version=_version(msg))


def _reply_version(version: int, intent: object) -> int:
    """The version a reply is stamped with: 2 only when it carries an intent for a request of
    version 2 or newer."""
    return INTENT_VERSION if intent is not None and version >= INTENT_VERSION else BASE_VERSION


def batch_to_msg(req_id: int, actions: np.ndarray, dt: float, obs_time: float,
                 latency_s: float, intent: np.ndarray | None = None,
                 version: int = INTENT_VERSION) -> dict[str, Any]:
    """The ``chunk_batch`` reply: ``actions (n, H, A)``, all rows starting at ``obs_time``;
    ``intent (n, I)`` travels when the request's ``version`` carries it."""
    v = _reply_version(version, intent)
    msg = {"v": v, "type": "chunk_batch", "id": req_id,
           "actions": encode_array(np.asarray(actions, dtype=np.float32)), "t0": obs_time,
           "dt": float(dt), "obs_time": obs_time, "latency_s": float(latency_s)}
    if v >= INTENT_VERSION:
        msg["intent"] = encode_array(np.asarray(intent, dtype=np.float32))
    return msg


def chunk_to_msg(req_id: int, chunk: ActionChunk, latency_s: float,
                 version: int = INTENT_VERSION) -> dict[str, Any]:
    """The ``chunk`` reply for request ``req_id`` (of protocol ``version``): the chunk's
    intent travels when the version carries it."""
    v = _reply_version(version, chunk.intent)
    msg = {"v": v, "type": "chunk", "id": req_id,
           "actions": encode_array(chunk.actions), "t0": chunk.t0, "dt": chunk.dt,
           "step0": chunk.step0, "obs_time": chunk.obs_time, "source": chunk.source,
           "latency_s": float(latency_s)}
    if v >= INTENT_VERSION:
        msg["intent"] = encode_array(chunk.intent)
    return msg


def _intent_field(msg: dict[str, Any], ndim: int) -> np.ndarray | None:
    """The reply's ``intent`` (version 2 and present), float32, at most ``MAX_INTENT`` wide
    and finite; ``None`` without one (a version 1 reply never has one)."""
    if _version(msg) < INTENT_VERSION or msg.get("intent") is None:
        return None
    intent = decode_array(msg.get("intent"), "intent", ndim=ndim).astype(np.float32)
    if not 1 <= intent.shape[-1] <= MAX_INTENT:
        raise ProtocolError("malformed", f"intent: {intent.shape[-1]} values per row, expected "
                                         f"1..{MAX_INTENT}")
    if not np.all(np.isfinite(intent)):
        raise ProtocolError("malformed", "intent: contains NaN or inf")
    return intent


def chunk_from_msg(msg: dict[str, Any]) -> ActionChunk:
    """Build the :class:`ActionChunk` of a ``chunk`` reply (with its intent, if it carries
    one); raises :class:`ProtocolError`."""
    actions = decode_array(msg.get("actions"), "actions", ndim=2)
    source = msg.get("source", "remote")
    intent = _intent_field(msg, ndim=1)
    try:
        return ActionChunk(actions=actions.astype(np.float32), t0=_number(msg, "t0"),
                           dt=_number(msg, "dt"), step0=_int(msg, "step0", -1),
                           obs_time=_number(msg, "obs_time"), source=str(source),
                           meta={"latency_s": _number(msg, "latency_s", 0.0),
                                 "id": _int(msg, "id")}, intent=intent)
    except ValueError as exc:  # ChunkError
        if isinstance(exc, ProtocolError):
            raise
        raise ProtocolError("malformed", f"chunk: {exc}") from exc


def batch_intent_from_msg(msg: dict[str, Any], rows: int) -> np.ndarray | None:
    """A ``chunk_batch`` reply's ``intent (rows, I)`` float32, or ``None`` without one;
    raises :class:`ProtocolError` for a wrong row count or values."""
    intent = _intent_field(msg, ndim=2)
    if intent is not None and intent.shape[0] != rows:
        raise ProtocolError("malformed", f"intent: {intent.shape[0]} rows for {rows} chunks")
    return intent


def negotiated_version(health: dict[str, Any]) -> int:
    """The newest version both sides speak, from a server's ``health`` reply (its
    ``versions``; a server that lists none speaks version 1 only)."""
    theirs = health.get("versions")
    if not isinstance(theirs, list):
        return BASE_VERSION
    common = [v for v in theirs if type(v) is int and v in SUPPORTED_VERSIONS]
    return max(common, default=BASE_VERSION)


def error_msg(req_id: int, code: str, message: str) -> dict[str, Any]:
    """An ``error`` reply."""
    if code not in ERROR_CODES:
        raise ValueError(f"unknown error code {code!r}")
    return {"v": BASE_VERSION, "type": "error", "id": req_id, "code": code,
            "message": message}
