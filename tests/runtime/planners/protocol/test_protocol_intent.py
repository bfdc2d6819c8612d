"""The planner intent in the protocol's chunk replies: version 2 carries it, version 1 never
does, and a peer of either version reads what the other sends (no sockets)."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from edgerl.contract.chunk import ActionChunk
from edgerl.runtime.planners.protocol.framing import (
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    ProtocolError,
    decode_payload,
    encode_array,
    encode_frame,
)
from edgerl.runtime.planners.protocol.messages import (
    batch_intent_from_msg,
    batch_to_msg,
    chunk_from_msg,
    chunk_to_msg,
    error_msg,
    negotiated_version,
    parse_plan_request,
)

INTENT = np.array([0.25, -0.75, 1.0], np.float32)


def _chunk(intent: np.ndarray | None = INTENT) -> ActionChunk:
    return ActionChunk(actions=np.arange(8, dtype=np.float32).reshape(4, 2), t0=3.5, dt=0.05,
                       step0=7, obs_time=3.4, source="x", intent=intent)


def _wire(msg: dict) -> dict:
    """``msg`` through a frame and back, as the peer decodes it."""
    return decode_payload(encode_frame(msg)[4:])


def test_versions():
    assert PROTOCOL_VERSION == 2 and SUPPORTED_VERSIONS == (1, 2)
    for v in SUPPORTED_VERSIONS:
        assert decode_payload(msgpack.packb({"v": v, "type": "plan"}))["v"] == v
    for bad in (3, 0, True, "2"):
        with pytest.raises(ProtocolError, match="unsupported_version"):
            decode_payload(msgpack.packb({"v": bad, "type": "plan"}))


def test_chunk_round_trip_with_intent_is_version_2_and_bitwise():
    msg = _wire(chunk_to_msg(9, _chunk(), 0.012))
    assert msg["v"] == 2
    back = chunk_from_msg(msg)
    assert back.intent.dtype == np.float32 and np.array_equal(back.intent, INTENT)
    assert np.array_equal(back.actions, _chunk().actions) and back.step0 == 7


def test_chunk_without_intent_stays_version_1():
    msg = _wire(chunk_to_msg(9, _chunk(None), 0.0))
    assert msg["v"] == 1 and "intent" not in msg
    assert chunk_from_msg(msg).intent is None


def test_a_version_1_request_gets_a_version_1_reply_without_the_intent():
    """An old client refuses any version but 1: its reply must be v1, the intent left out."""
    req = parse_plan_request({"v": 1, "type": "plan", "id": 3, "obs_time": 0.5,
                              "obs": encode_array(np.zeros(3, np.float32))})
    assert req.version == 1
    msg = _wire(chunk_to_msg(req.id, _chunk(), 0.0, version=req.version))
    assert msg["v"] == 1 and "intent" not in msg
    assert chunk_from_msg(msg).intent is None
    batch = _wire(batch_to_msg(3, np.zeros((2, 4, 2)), 0.05, 0.5, 0.0,
                               intent=np.zeros((2, 3)), version=1))
    assert batch["v"] == 1 and "intent" not in batch
    # errors and health carry nothing new: stamped v1, so every client reads them
    assert _wire(error_msg(3, "malformed", "x"))["v"] == 1


def test_a_version_1_reply_with_a_stray_intent_field_is_read_as_version_1():
    msg = chunk_to_msg(9, _chunk(None), 0.0)
    msg["intent"] = encode_array(INTENT)  # not defined in v1: ignored, as a v1 peer would
    assert chunk_from_msg(_wire(msg)).intent is None


def test_batch_round_trip_with_and_without_intent():
    actions = np.random.default_rng(0).normal(size=(3, 4, 2)).astype(np.float32)
    intent = np.random.default_rng(1).uniform(-1, 1, (3, 2)).astype(np.float32)
    msg = _wire(batch_to_msg(5, actions, 0.05, 1.0, 0.0, intent=intent))
    assert msg["v"] == 2 and np.array_equal(batch_intent_from_msg(msg, 3), intent)
    plain = _wire(batch_to_msg(5, actions, 0.05, 1.0, 0.0))
    assert plain["v"] == 1 and batch_intent_from_msg(plain, 3) is None
    with pytest.raises(ProtocolError, match="intent: 3 rows for 2 chunks"):
        batch_intent_from_msg(msg, 2)


@pytest.mark.parametrize("intent, match", [
    (np.zeros(9, np.float32), "9 values per row, expected 1..8"),
    (np.array([0.0, np.nan], np.float32), "NaN or inf"),
    (np.zeros((1, 2), np.float32), "intent.shape"),
])
def test_malformed_intent_refused_by_name(intent, match):
    msg = chunk_to_msg(9, _chunk(None), 0.0)
    msg.update(v=2, intent=encode_array(intent))
    with pytest.raises(ProtocolError, match=match):
        chunk_from_msg(_wire(msg))


def test_negotiated_version_from_the_health_reply():
    assert negotiated_version({"type": "health"}) == 1  # a v1 server lists none
    assert negotiated_version({"versions": [1, 2]}) == 2
    assert negotiated_version({"versions": [1, 2, 7]}) == 2
    assert negotiated_version({"versions": [9]}) == 1
    assert negotiated_version({"versions": "2"}) == 1
