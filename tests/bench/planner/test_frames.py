"""``edgerl.bench.planner.frames``: the load generators' requests decode as the server reads
them, the hostile ones are refused as they should be, and replies are read back."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from edgerl.bench.planner.frames import hostile_frame, plan_frame, read_frame
from edgerl.runtime.planners.protocol.framing import (
    HEADER,
    ProtocolError,
    decode_array,
    decode_payload,
    encode_frame,
)


def _body(frame: bytes) -> bytes:
    (size,) = HEADER.unpack(frame[:HEADER.size])
    assert len(frame) == HEADER.size + size
    return frame[HEADER.size:]


def test_plan_frame_is_a_well_formed_plan_request():
    msg = decode_payload(_body(plan_frame(7, 5, 12.5, 0.05)))
    assert (msg["type"], msg["id"], msg["obs_time"], msg["deadline_s"]) == ("plan", 7, 12.5, 0.05)
    obs = decode_array(msg["obs"], "obs", ndim=1)
    assert obs.dtype == np.float32 and obs.tolist() == [0.5] * 5


def test_hostile_frames_oversized_and_malformed():
    (announced,) = HEADER.unpack(hostile_frame("oversized", 0, 8))
    assert announced == 100_000_000  # a header alone: a frame it never sends
    batch = decode_payload(_body(hostile_frame("oversized", 1, 8)), max_items=1 << 16)
    assert batch["type"] == "plan_batch" and len(batch["instructions"]) == 4096
    for k in range(5):  # broken arrays the server must refuse
        msg = decode_payload(_body(hostile_frame("malformed", k, 8)))
        with pytest.raises(ProtocolError):
            decode_array(msg["obs"], "obs", ndim=1)
    with pytest.raises(ProtocolError):  # k % 6 == 5: garbage, not msgpack
        decode_payload(_body(hostile_frame("malformed", 5, 8)))


def test_read_frame_reads_one_reply_or_none_at_the_end():
    async def read_two() -> tuple:
        reader = asyncio.StreamReader()
        reader.feed_data(encode_frame({"type": "chunk", "id": 3}))
        reader.feed_eof()
        return await read_frame(reader, 1.0), await read_frame(reader, 1.0)

    first, second = asyncio.run(read_two())
    assert first["type"] == "chunk" and first["id"] == 3 and second is None
