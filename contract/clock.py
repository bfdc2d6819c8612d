"""Clocks: the real monotonic clock and a virtual one for deterministic tests.

Everything time-dependent (the edit loop, chunk indexing, planner scheduling) takes a clock,
so tests can step time exactly and simulations can run faster than real time.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "MonotonicClock", "VirtualClock"]


class Clock(Protocol):
    """A source of monotonic seconds that can also wait until a time."""

    def now(self) -> float: ...

    def sleep_until(self, t: float, spin_s: float | None = None) -> None: ...


class MonotonicClock:
    """``time.perf_counter`` (monotonic, ns resolution), sleeping then spinning the last
    ``spin_s`` seconds so wake-up jitter stays in microseconds."""

    def __init__(self, spin_s: float = 300e-6) -> None:
        self.spin_s = spin_s

    def now(self) -> float:
        return time.perf_counter()

    def sleep_until(self, t: float, spin_s: float | None = None) -> None:
        """Sleep, then busy-wait the last ``spin_s`` seconds (default: the clock's) until
        ``t``; ``spin_s=0`` only sleeps (the OS may wake it late), ``math.inf`` only spins."""
        spin = self.spin_s if spin_s is None else spin_s
        remaining = t - time.perf_counter()
        if remaining > spin:
            time.sleep(remaining - spin)
        while time.perf_counter() < t:
            pass


class VirtualClock:
    """A clock that only moves when told to; ``sleep_until`` jumps to the target time."""

    def __init__(self, start: float = 0.0) -> None:
        self._t = float(start)

    def now(self) -> float:
        return self._t

    def advance(self, dt: float) -> float:
        """Move time forward by ``dt`` seconds; returns the new time."""
        if dt < 0:
            raise ValueError(f"time cannot go backwards (dt={dt})")
        self._t += dt
        return self._t

    def sleep_until(self, t: float, spin_s: float | None = None) -> None:
        self._t = max(self._t, float(t))
