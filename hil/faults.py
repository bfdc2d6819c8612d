"""Fault injection for the serial link: byte corruption, dropped bytes, garbage bursts
(byte filters for :class:`~edgerl.runtime.serial_transport.SerialTransport`), plus the timed
host faults (freeze, cable pull) the harness acts out.

Spec string (``edgerl hil --faults``), comma-separated ``key=value``::

    corrupt=0.01      per-byte probability of corrupting a host->firmware byte
    corrupt_rx=0.001  per-byte probability of corrupting a firmware->host byte
    drop=0.001        per-byte probability of dropping a host->firmware byte
    garbage=2         bursts of 1-32 random bytes per second injected host->firmware
                      (after a frame; the transport's leading 0x00 ends them)
    freeze=1.0[:0.5]  the host freezes at t=1.0 s (of the run) for 0.5 s
    unplug=2.0[:0.3]  the cable is pulled at t=2.0 s and re-plugged 0.3 s later
    seed=0            random seed

Corruption XORs a byte with a non-zero value that keeps it non-zero, so a corrupted frame
stays exactly one (bad) frame: the firmware's ``bad_frames`` must equal
:attr:`TxFaults.corrupted_frames` when only ``corrupt`` is active.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, fields

from edgerl.contract.wire import FrameParser, decode

__all__ = ["FaultSpec", "RxFaults", "TxFaults"]


@dataclass
class FaultSpec:
    """Parsed ``--faults`` spec (see the module docstring)."""

    corrupt: float = 0.0
    corrupt_rx: float = 0.0
    drop: float = 0.0
    garbage: float = 0.0
    freeze_at: float | None = None
    freeze_s: float = 0.5
    unplug_at: float | None = None
    unplug_s: float = 0.3
    seed: int = 0

    @classmethod
    def parse(cls, spec: str | None) -> FaultSpec:
        """Parse ``"corrupt=0.01,freeze=1.0:0.5"``; ValueError names a bad key or value."""
        out = cls()
        if not spec:
            return out
        for item in spec.split(","):
            item = item.strip()
            if not item:
                continue
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"fault {item!r}: expected key=value")
            try:
                if key in ("corrupt", "corrupt_rx", "drop"):
                    rate = float(value)
                    if not 0.0 <= rate <= 1.0:
                        raise ValueError("rate must be in [0, 1]")
                    setattr(out, key, rate)
                elif key == "garbage":
                    out.garbage = float(value)
                    if out.garbage < 0:
                        raise ValueError("bursts per second must be >= 0")
                elif key in ("freeze", "unplug"):
                    at, _, dur = value.partition(":")
                    setattr(out, f"{key}_at", float(at))
                    if dur:
                        setattr(out, f"{key}_s", float(dur))
                    if float(at) < 0 or (dur and float(dur) <= 0):
                        raise ValueError("time must be >= 0 and duration > 0")
                elif key == "seed":
                    out.seed = int(value)
                else:
                    known = "corrupt, corrupt_rx, drop, garbage, freeze, unplug, seed"
                    raise ValueError(f"unknown fault (known: {known})")
            except ValueError as exc:
                raise ValueError(f"fault {item!r}: {exc}") from None
        return out

    def as_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _corrupt_byte(rng: random.Random, b: int) -> int:
    """A different non-zero byte (XOR with a non-zero mask)."""
    while True:
        v = b ^ rng.randrange(1, 256)
        if v != 0:
            return v


class TxFaults:
    """Host->firmware byte filter; called once per outgoing frame.

    Attributes:
        corrupted_frames: Frames with at least one corrupted byte.
        corrupted_setpoints: ``seq`` of every SETPOINT frame that was corrupted.
        dropped_bytes / dropped_frames: Bytes dropped, frames that lost at least one.
        garbage_bursts / garbage_bytes: Injected noise.
    """

    def __init__(self, spec: FaultSpec) -> None:
        self.spec = spec
        self.rng = random.Random(spec.seed)
        self.corrupted_frames = 0
        self.corrupted_setpoints: set[int] = set()
        self.dropped_bytes = 0
        self.dropped_frames = 0
        self.garbage_bursts = 0
        self.garbage_bytes = 0
        self._last_t: float | None = None

    def __call__(self, frame: bytes) -> bytes:
        s, rng = self.spec, self.rng
        out = bytearray(frame)
        if s.corrupt > 0:
            hit = False
            for i in range(len(out) - 1):  # the delimiter is kept
                if rng.random() < s.corrupt:
                    out[i] = _corrupt_byte(rng, out[i])
                    hit = True
            if hit:
                self.corrupted_frames += 1
                msg = _decode_one(frame)
                if msg is not None and msg.name == "SETPOINT":
                    self.corrupted_setpoints.add(int(msg["seq"]))
        if s.drop > 0:
            kept = bytearray(b for b in out if rng.random() >= s.drop)
            if len(kept) != len(out):
                self.dropped_bytes += len(out) - len(kept)
                self.dropped_frames += 1
            out = kept
        if s.garbage > 0:
            now = time.perf_counter()
            dt = 0.0 if self._last_t is None else now - self._last_t
            self._last_t = now
            if rng.random() < s.garbage * dt:
                burst = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 33)))
                self.garbage_bursts += 1
                self.garbage_bytes += len(burst)
                out += burst  # noise after the frame, until the next frame's delimiter
        return bytes(out)

    def as_dict(self) -> dict[str, int]:
        return {"corrupted_frames": self.corrupted_frames,
                "corrupted_setpoints": len(self.corrupted_setpoints),
                "dropped_bytes": self.dropped_bytes, "dropped_frames": self.dropped_frames,
                "garbage_bursts": self.garbage_bursts, "garbage_bytes": self.garbage_bytes}


class RxFaults:
    """Firmware->host byte filter (arbitrary chunks): corrupts bytes at ``corrupt_rx``."""

    def __init__(self, spec: FaultSpec) -> None:
        self.rate = spec.corrupt_rx
        self.rng = random.Random(spec.seed + 1)
        self.corrupted_bytes = 0

    def __call__(self, data: bytes) -> bytes:
        if self.rate <= 0:
            return data
        out = bytearray(data)
        for i, b in enumerate(out):
            if b != 0 and self.rng.random() < self.rate:
                out[i] = _corrupt_byte(self.rng, b)
                self.corrupted_bytes += 1
        return bytes(out)


def _decode_one(frame: bytes):
    frames = FrameParser().feed(frame)
    return decode(frames[0]) if frames else None
