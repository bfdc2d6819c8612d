"""The wire schema, the generated C header and the Python codec agree."""

from __future__ import annotations

import dataclasses
import math

import pytest

from edgerl.contract.wire import codec, gen_c, schema
from edgerl.contract.wire.framing import FrameParser


def test_committed_header_is_generated_from_the_schema():
    committed = gen_c.DEFAULT_OUT.read_text()
    assert committed == gen_c.generate_header(), \
        "firmware/include/edgerl_msgs.h is stale: run python -m edgerl.contract.wire.gen_c"
    assert f"#define EDGERL_SCHEMA_HASH 0x{schema.schema_hash():08X}UL" in committed
    for m in schema.MESSAGES:
        assert f"#define EDGERL_MSG_{m.name}_SIZE {m.size}\n" in committed


def test_gen_c_check_flags_a_stale_file(tmp_path):
    out = tmp_path / "edgerl_msgs.h"
    assert gen_c.main([str(out)]) == 0
    assert gen_c.main([str(out), "--check"]) == 0
    out.write_text(out.read_text().replace("EDGERL_MAX_CMD 8", "EDGERL_MAX_CMD 9"))
    assert gen_c.main([str(out), "--check"]) == 1


def test_schema_hash_changes_with_any_field(monkeypatch):
    base = schema.schema_hash()
    sp = schema.message_by_name("SETPOINT")
    changed = dataclasses.replace(sp, fields=sp.fields[:-1] + (
        dataclasses.replace(sp.fields[-1], unit="rad"),))
    monkeypatch.setattr(schema, "MESSAGES", tuple(changed if m is sp else m
                                                  for m in schema.MESSAGES))
    assert schema.schema_hash() != base


def test_payload_sizes_match_struct_formats():
    import struct
    for m in schema.MESSAGES:
        assert struct.calcsize(m.struct_format) == m.size


def test_codec_roundtrip_setpoint_and_state():
    frame = codec.encode("SETPOINT", 513, seq=7, host_time_us=123456, n=2, q=[0.5, -1.25])
    (f,) = FrameParser().feed(frame)
    msg = codec.decode(f)
    assert msg.name == "SETPOINT" and msg.seq == 513
    assert msg["seq"] == 7 and msg["host_time_us"] == 123456 and msg["n"] == 2
    assert msg["q"] == (0.5, -1.25, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    state = list(range(16))
    frame = codec.encode("STATE", 1, fw_time_us=2**32 - 1, n_state=16, state=state, mode=3)
    msg = codec.decode(FrameParser().feed(frame)[0])
    assert msg["fw_time_us"] == 2**32 - 1 and msg["state"] == tuple(float(x) for x in state)
    assert msg["mode"] == schema.Mode.ESTOP


def test_codec_rejects_bad_fields():
    with pytest.raises(ValueError, match="unknown field"):
        codec.encode_payload("SETPOINT", speed=1)
    with pytest.raises(ValueError, match="at most 8"):
        codec.encode_payload("SETPOINT", q=[0.0] * 9)
    with pytest.raises(ValueError, match="out of range"):
        codec.encode_payload("SETPOINT", n=300)
    with pytest.raises(KeyError, match="unknown wire message 'NOPE'"):
        codec.encode("NOPE", 0)
    assert not codec.finite([1.0, math.nan])


def test_chunk_carries_the_planner_intent_within_one_frame():
    chunk = schema.message_by_name("CHUNK")
    assert schema.MAX_INTENT == 8 and schema.MAX_CHUNK_FLOATS == 50  # 56 before the intent
    assert chunk.size == 255  # the whole 255-byte payload
    names = [f.name for f in chunk.fields]
    assert names[-2:] == ["intent_n", "intent"] and chunk.fields[-1].count == schema.MAX_INTENT
    intent = [0.25, -0.5, 1.0]
    frame = codec.encode("CHUNK", 9, step0=3, host_time_us=10, t0_us=11, dt_us=20000,
                         obs_time_us=9, horizon=2, n=1, actions=[0.5, -0.5],
                         intent_n=3, intent=intent)
    msg = codec.decode(FrameParser().feed(frame)[0])
    assert msg["intent_n"] == 3 and msg["intent"][:3] == tuple(intent)
    assert msg["intent"][3:] == (0.0,) * 5 and msg["actions"][:2] == (0.5, -0.5)
    without = codec.decode(FrameParser().feed(codec.encode("CHUNK", 10, horizon=1, n=1,
                                                           actions=[0.1]))[0])
    assert without["intent_n"] == 0
    with pytest.raises(ValueError, match="at most 8"):
        codec.encode_payload("CHUNK", intent=[0.0] * 9)
    header = gen_c.generate_header()
    assert "#define EDGERL_MAX_INTENT 8\n" in header and "float intent[8];" in header
