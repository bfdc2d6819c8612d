"""The frames the planner-server load generators send over the planner protocol and read back.

Split from :mod:`.load` so that both load shapes share one definition of a request: the
closed-loop test with hostile clients (:mod:`.load`) and the open-loop offered-load sweep
(:mod:`.load_sweep`) send the same ``plan`` frame and read replies the same way; the hostile
frames (oversized announcements, malformed arrays, garbage) are here beside them.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import msgpack
import numpy as np

from edgerl.runtime.planners.protocol.framing import (
    HEADER,
    PROTOCOL_VERSION,
    encode_array,
    encode_frame,
)

__all__ = ["hostile_frame", "plan_frame", "read_frame"]


async def read_frame(reader: asyncio.StreamReader, timeout_s: float) -> dict[str, Any] | None:
    """One reply map, or ``None`` when the server closed the connection; each read (header,
    then body) may take ``timeout_s`` seconds (``asyncio.TimeoutError`` past that)."""
    try:
        header = await asyncio.wait_for(reader.readexactly(HEADER.size), timeout_s)
        (size,) = HEADER.unpack(header)
        body = await asyncio.wait_for(reader.readexactly(size), timeout_s)
    except asyncio.IncompleteReadError:
        return None
    return msgpack.unpackb(body, raw=False)


def plan_frame(req_id: int, obs_dim: int, now: float, deadline_s: float) -> bytes:
    """A well-formed ``plan`` request: an observation of ``obs_dim`` values of 0.5 (float32)
    stamped ``now`` (s), no instruction, ``deadline_s`` seconds to answer."""
    obs = np.full(obs_dim, 0.5, np.float32)
    return encode_frame({"v": PROTOCOL_VERSION, "type": "plan", "id": req_id,
                         "obs": encode_array(obs), "obs_time": now, "instruction": "",
                         "deadline_s": deadline_s})


_BAD_ARRAYS = (
    {"dtype": ["float32"], "shape": [8], "data": b"\0" * 32},
    {"dtype": {"x": 1}, "shape": [8], "data": b"\0" * 32},
    {"dtype": "float32", "shape": [True], "data": b"\0" * 4},
    {"dtype": "float32", "shape": [2 ** 32, 2 ** 32], "data": b""},
    {"dtype": "float32", "shape": [2 ** 64 - 1], "data": b""},
)


@functools.lru_cache(maxsize=64)
def hostile_frame(kind: str, k: int, obs_dim: int) -> bytes:
    """The ``k``-th thing a hostile client of ``kind`` (``oversized`` or ``malformed``) sends
    (``k`` cycles; cached so the attackers cost the load generator little)."""
    if kind == "oversized":
        if k % 2 == 0:
            return HEADER.pack(100_000_000)
        texts = [f"new instruction {k}-{i}" for i in range(4096)]
        return encode_frame({"v": PROTOCOL_VERSION, "type": "plan_batch", "id": k,
                             "obs": encode_array(np.zeros((4096, obs_dim), np.float32)),
                             "instructions": texts, "obs_time": 0.0, "deadline_s": 0.0})
    if k % 6 == 5:
        junk = b"\xc1" * 16
        return HEADER.pack(len(junk)) + junk
    return encode_frame({"v": PROTOCOL_VERSION, "type": "plan", "id": k, "obs_time": 0.0,
                         "obs": _BAD_ARRAYS[k % len(_BAD_ARRAYS)]})
