"""Python framing: COBS, CRC, the streaming parser, and a 1e5-input fuzz."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from edgerl.contract.wire import codec
from edgerl.contract.wire.framing import (
    MAX_ENCODED,
    FrameParser,
    cobs_decode,
    cobs_encode,
    crc16,
    encode_frame,
)
from edgerl.contract.wire.fuzz import is_legal, make_inputs


def test_crc16_ccitt_false_check_value():
    assert crc16(b"123456789") == 0x29B1
    assert crc16(b"") == 0xFFFF


@given(st.binary(max_size=700))
def test_cobs_roundtrip_has_no_zero(data):
    enc = cobs_encode(data)
    assert 0 not in enc
    assert len(enc) <= len(data) + len(data) // 254 + 1
    assert cobs_decode(enc) == data


def test_cobs_decode_rejects_truncated_block():
    assert cobs_decode(b"\x05ab") is None
    assert cobs_decode(b"\x00") is None


@settings(max_examples=200)
@given(st.lists(st.binary(max_size=60), min_size=1, max_size=8), st.data())
def test_parser_is_chunking_invariant(payloads, data):
    stream = b"".join(encode_frame(0x42, i, p) for i, p in enumerate(payloads))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    parser = FrameParser(sizes=None)
    got = []
    prev = 0
    for c in cuts + [len(stream)]:
        got += parser.feed(stream[prev:c])
        prev = c
    assert [f.payload for f in got] == payloads
    assert [f.seq for f in got] == list(range(len(payloads)))
    assert parser.stats.bad_frames == 0


def test_parser_resyncs_after_garbage_and_counts_it():
    good = codec.encode("HEARTBEAT", 1, time_us=5)
    parser = FrameParser()
    frames = parser.feed(b"\x13\x37garbage\x00\x00" + good + b"\xff" * 10 + b"\x00" + good)
    assert [codec.decode(f).name for f in frames] == ["HEARTBEAT", "HEARTBEAT"]
    assert parser.stats.bad_frames == 2
    assert parser.stats.frames_ok == 2


def test_parser_counts_overflow_once_and_recovers():
    parser = FrameParser()
    frames = parser.feed(b"\x01" * (MAX_ENCODED + 50) + b"\x00" + codec.encode("ESTOP", 0))
    assert len(frames) == 1 and parser.stats.overflow == 1 and parser.stats.bad_frames == 1


def test_parser_rejects_unknown_id_and_wrong_size():
    parser = FrameParser()
    assert parser.feed(encode_frame(0x7E, 0, b"")) == []
    assert parser.feed(encode_frame(0x12, 1, b"\x01" * 5)) == []  # HEARTBEAT is 4 bytes
    assert (parser.stats.bad_id, parser.stats.bad_size) == (1, 1)


def test_trailing_zeros_are_truncated_on_the_wire_and_zero_filled_back():
    frame = codec.encode("SETPOINT", 3, seq=1, host_time_us=2, n=1, q=[0.5])
    assert len(frame) < 6 + 41  # 13 of 41 payload bytes are sent
    (f,) = FrameParser().feed(frame)
    assert len(f.payload) == 41 and codec.decode(f)["q"][:2] == (0.5, 0.0)
    (f,) = FrameParser().feed(codec.encode("ESTOP", 4))  # all-zero payload: len 0
    assert f.payload == b"\x00" and codec.decode(f)["reason"] == 0


def test_parser_counts_sequence_gaps_as_lost():
    parser = FrameParser()
    for seq in (10, 11, 14, 15, 0xFFFF):
        parser.feed(codec.encode("HEARTBEAT", seq))
    parser.feed(codec.encode("HEARTBEAT", 1))  # wraps: 0xFFFF -> 1 loses one
    assert parser.stats.lost_frames == 2 + 1  # 15 -> 0xFFFF is "old" (not counted)


def test_python_parser_fuzz_1e5_no_crash_no_false_accept():
    inputs = make_inputs(100_000)
    false_accepts = 0
    accepted = 0
    for stream, legal in inputs:
        parser = FrameParser()
        frames = parser.feed(stream)  # must not raise
        accepted += len(frames)
        if not is_legal(frames, legal):
            false_accepts += 1
    assert false_accepts == 0
    assert accepted > 40_000  # the untouched neighbours of mutated frames got through


@settings(max_examples=300)
@given(st.binary(max_size=400))
def test_parser_never_raises_on_arbitrary_bytes(data):
    parser = FrameParser()
    frames = parser.feed(data)
    assert parser.stats.frames_ok == len(frames)
    assert parser.stats.bad_frames <= data.count(0) + 1
