"""Deterministic fuzz corpus for the framing (used by the Python and C parser tests).

:func:`make_inputs` yields ``(stream, legal_frames)``: half are random byte strings (nothing
may be accepted), half are valid frame streams in which one frame got a CRC-detectable
mutation (1-3 bit flips, a 1-2 byte burst, a dropped or an inserted byte). A parser passes
if every frame it accepts is one of ``legal_frames`` (the untouched originals).
"""

from __future__ import annotations

import random
from collections.abc import Iterable

from edgerl.contract.wire.framing import Frame, FrameParser, encode_frame

__all__ = ["is_legal", "make_inputs"]

_IDS = ((0x10, 41), (0x12, 4), (0x13, 1), (0x15, 43), (0x11, 115), (0x01, 10))


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    buf = bytearray(frame)
    kind = rng.randrange(4)
    if kind == 0:  # 1-3 bit flips (CRC-16/CCITT detects all 1-3 bit errors in short frames)
        for bit in rng.sample(range((len(buf) - 1) * 8), rng.randrange(1, 4)):
            buf[bit // 8] ^= 1 << (bit % 8)
    elif kind == 1:  # burst of <= 16 bits
        pos = rng.randrange(len(buf) - 1)
        for p in range(pos, min(pos + rng.randrange(1, 3), len(buf) - 1)):
            buf[p] ^= rng.randrange(1, 256)
    elif kind == 2:
        del buf[rng.randrange(len(buf) - 1)]
    else:
        buf.insert(rng.randrange(len(buf)), rng.randrange(1, 256))
    return bytes(buf)


def make_inputs(n: int, seed: int = 20261130) -> list[tuple[bytes, list[bytes]]]:
    """``n`` fuzz inputs (see the module docstring)."""
    rng = random.Random(seed)
    out: list[tuple[bytes, list[bytes]]] = []
    for i in range(n):
        if i % 2 == 0:
            out.append((rng.randbytes(rng.randrange(0, 80)), []))
            continue
        frames = []
        for j in range(rng.randrange(1, 4)):
            mid, size = rng.choice(_IDS)
            frames.append(encode_frame(mid, (i * 4 + j) & 0xFFFF, rng.randbytes(size)))
        target = rng.randrange(len(frames))
        mutated = _mutate(rng, frames[target])
        legal = [f for j, f in enumerate(frames) if j != target or mutated == f]
        frames[target] = mutated
        out.append((b"".join(frames), legal))
    return out


def is_legal(frames: Iterable[Frame], legal: list[bytes]) -> bool:
    """True if every accepted frame is byte-identical to one of the ``legal`` originals."""
    allowed = set()
    for f in legal:
        allowed.update((g.msg_id, g.seq, g.payload) for g in FrameParser().feed(f))
    return all((f.msg_id, f.seq, f.payload) in allowed for f in frames)
