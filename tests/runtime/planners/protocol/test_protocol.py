"""The planner protocol: arrays, chunk messages and refused payloads (no sockets)."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from edgerl.contract.chunk import ActionChunk
from edgerl.runtime.planners.protocol.framing import (
    ProtocolError,
    decode_array,
    decode_payload,
    encode_array,
    encode_frame,
)
from edgerl.runtime.planners.protocol.messages import chunk_from_msg, chunk_to_msg


class TestProtocol:
    def test_array_round_trip_is_bitwise(self):
        a = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
        b = decode_array(encode_array(a), "a", ndim=2)
        assert b.dtype == np.float32 and np.array_equal(a, b)

    def test_chunk_round_trip(self):
        c = ActionChunk(actions=np.arange(8, dtype=np.float32).reshape(4, 2), t0=3.5, dt=0.05,
                        step0=7, obs_time=3.4, source="x")
        body = encode_frame(chunk_to_msg(9, c, 0.012))[4:]
        back = chunk_from_msg(decode_payload(body))
        assert np.array_equal(back.actions, c.actions)
        assert (back.t0, back.dt, back.step0, back.obs_time, back.source) == (3.5, 0.05, 7, 3.4,
                                                                              "x")
        assert back.meta["latency_s"] == pytest.approx(0.012)

    def test_refuses_wrong_version_ext_types_and_bad_arrays(self):
        with pytest.raises(ProtocolError, match="unsupported_version"):
            decode_payload(msgpack.packb({"v": 99, "type": "plan"}))
        with pytest.raises(ProtocolError, match="extension type 42"):
            decode_payload(msgpack.packb({"v": 1, "type": "plan",
                                          "x": msgpack.ExtType(42, b"evil")}))
        with pytest.raises(ProtocolError, match="payload must be a map"):
            decode_payload(msgpack.packb([1, 2]))
        with pytest.raises(ProtocolError, match="obs.data: 4 bytes for shape"):
            decode_array({"dtype": "float32", "shape": [3], "data": b"\0" * 4}, "obs")
