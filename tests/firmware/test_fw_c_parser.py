"""The C framing (firmware/src/wire.c) against the Python one: 1e5 fuzz inputs, identical
accept/reject decisions, identical encoder output."""

from __future__ import annotations

import random
import struct
import subprocess

from edgerl.contract.wire import codec
from edgerl.contract.wire.framing import Frame, FrameParser, encode_frame
from edgerl.contract.wire.fuzz import is_legal, make_inputs
from edgerl.contract.wire.schema import MESSAGES

FUZZ_N = 100_000


def run_driver(binary: str, records: list[bytes], *args: str) -> list[str]:
    blob = b"".join(struct.pack("<I", len(r)) + r for r in records)
    res = subprocess.run([binary, *args], input=blob, capture_output=True, timeout=120,
                         check=True)
    return res.stdout.decode().splitlines()


def split_results(lines: list[str]) -> list[tuple[list[tuple[int, int, bytes]], list[int]]]:
    out, cur = [], []
    for line in lines:
        parts = line.split()
        if parts[0] == "F":
            cur.append((int(parts[1]), int(parts[2]),
                        bytes.fromhex(parts[3]) if len(parts) > 3 else b""))
        else:
            out.append((cur, [int(x) for x in parts[1:]]))
            cur = []
    return out


def test_c_parser_fuzz_matches_python_and_never_false_accepts(fw_binaries):
    driver = fw_binaries["plain"].replace("edgerl_fw_host", "fuzz_parser")
    inputs = make_inputs(FUZZ_N, seed=7)
    results = split_results(run_driver(driver, [s for s, _ in inputs]))
    assert len(results) == FUZZ_N  # one result per input: the driver never crashed
    mismatches = false_accepts = accepted = bad = 0
    for (stream, legal), (c_frames, (c_ok, c_bad, c_lost)) in zip(inputs, results):
        py = FrameParser()
        py_frames = [(f.msg_id, f.seq, f.payload) for f in py.feed(stream)]
        accepted += c_ok
        bad += c_bad
        if py_frames != c_frames or (py.stats.bad_frames, py.stats.lost_frames) != (c_bad,
                                                                                     c_lost):
            mismatches += 1
        if not is_legal([Frame(*f) for f in c_frames], legal):
            false_accepts += 1
    assert mismatches == 0
    assert false_accepts == 0
    assert accepted > 40_000 and bad > 50_000


def test_c_encoder_is_byte_identical(fw_binaries):
    driver = fw_binaries["plain"].replace("edgerl_fw_host", "fuzz_parser")
    rng = random.Random(3)
    cases = [(m.id, rng.randrange(65536), rng.randbytes(m.size)) for m in MESSAGES] + \
            [(0x7F, 1, bytes(255)), (0x7F, 2, b"\xff" * 255), (0x7F, 3, b"")]
    lines = run_driver(driver, [bytes([i, s & 0xFF, s >> 8]) + p for i, s, p in cases],
                       "--encode")
    assert [bytes.fromhex(line.split()[1]) for line in lines] == \
        [encode_frame(i, s, p) for i, s, p in cases]


def test_c_parser_accepts_python_frames_split_anywhere(fw_binaries):
    driver = fw_binaries["plain"].replace("edgerl_fw_host", "fuzz_parser")
    stream = b"\x00junk\x00" + codec.encode("SETPOINT", 9, seq=1, n=1, q=[0.5]) \
        + codec.encode("ESTOP", 10, reason=2)
    ((frames, (ok, bad_frames, lost)),) = split_results(run_driver(driver, [stream]))
    assert [(f[0], f[1]) for f in frames] == [(0x10, 9), (0x13, 10)]
    assert (ok, bad_frames, lost) == (2, 1, 0)
