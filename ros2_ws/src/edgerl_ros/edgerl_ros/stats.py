"""Small thread-safe measurement helpers the nodes report on ``/diagnostics`` (no rclpy here)."""

from __future__ import annotations

import threading
from collections import Counter

import numpy as np

__all__ = ["AnswerLatency", "DropCounter", "IntervalMeter", "Samples"]


class Samples:
    """A ring buffer of float samples (e.g. latencies in seconds) with percentiles.

    Args:
        capacity: Newest samples kept; older ones are overwritten.
    """

    def __init__(self, capacity: int = 20000) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self._buf = np.zeros(capacity, dtype=np.float64)
        self._n = 0
        self._lock = threading.Lock()

    def add(self, value: float) -> None:
        with self._lock:
            self._buf[self._n % self._buf.shape[0]] = value
            self._n += 1

    @property
    def count(self) -> int:
        """Samples ever added."""
        return self._n

    def values(self) -> np.ndarray:
        """The kept samples, shape ``(min(count, capacity),)``."""
        with self._lock:
            return self._buf[: min(self._n, self._buf.shape[0])].copy()

    def percentile(self, q: float) -> float:
        """``q``-th percentile (0..100) of the kept samples; NaN when empty."""
        vals = self.values()
        return float(np.percentile(vals, q)) if vals.size else float("nan")


class AnswerLatency(Samples):
    """State stamp -> command latency samples (s), counting only the first command that
    answers each state: a later one for the same or an older stamp (the edit node's clock
    fallback re-answering while the robot stalled) is counted in :attr:`repeats` instead.
    Called from one thread (the robot's command path)."""

    def __init__(self, capacity: int = 20000) -> None:
        super().__init__(capacity)
        self._answered_ns = 0  # newest state stamp answered
        self.repeats = 0

    def answer(self, stamp_ns: int, now_ns: int) -> bool:
        """Record a command for the state stamped ``stamp_ns`` arriving at ``now_ns`` (ns);
        returns whether it was the first answer to that state."""
        if stamp_ns > self._answered_ns:
            self._answered_ns = stamp_ns
            self.add((now_ns - stamp_ns) * 1e-9)
            return True
        self.repeats += 1
        return False


class IntervalMeter:
    """Rate and jitter of a periodic event from its timestamps (monotonic seconds).

    ``rate_hz`` is ``(n - 1) / (t_last - t_first)`` over the kept events; ``jitter_p99_s`` is
    the 99th percentile of ``|interval - nominal|`` (nominal = the mean interval when not
    given).
    """

    def __init__(self, nominal_period_s: float = 0.0, capacity: int = 20000) -> None:
        self.nominal_period_s = nominal_period_s
        self._times = Samples(capacity)

    def mark(self, t: float) -> None:
        self._times.add(t)

    @property
    def count(self) -> int:
        return self._times.count

    def _intervals(self) -> np.ndarray:
        t = np.sort(self._times.values())
        return np.diff(t)

    def rate_hz(self) -> float:
        gaps = self._intervals()
        if gaps.size == 0 or gaps.sum() <= 0:
            return float("nan")
        return float(gaps.size / gaps.sum())

    def jitter_p99_s(self) -> float:
        gaps = self._intervals()
        if gaps.size == 0:
            return float("nan")
        nominal = self.nominal_period_s or float(gaps.mean())
        return float(np.percentile(np.abs(gaps - nominal), 99))


class DropCounter:
    """Dropped bad messages counted by ``(topic, reason)``; thread-safe."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self.last_reason = ""

    def drop(self, topic: str, reason: str) -> None:
        with self._lock:
            self._counts[(topic, reason)] += 1
            self.last_reason = f"{topic}: {reason}"

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self._counts.values())

    def values(self) -> dict[str, int]:
        """The ``/diagnostics`` entries: ``dropped_bad_msgs`` (the total) and
        ``"dropped <topic> <reason kind>"`` per :meth:`by_key`."""
        return {"dropped_bad_msgs": self.total,
                **{f"dropped {k}": v for k, v in self.by_key().items()}}

    def by_key(self) -> dict[str, int]:
        """``{"<topic> <reason kind>": count}`` (kind = text before the first ':')."""
        out: Counter[str] = Counter()
        with self._lock:
            for (topic, reason), n in self._counts.items():
                out[f"{topic} {reason.split(':')[0]}"] += n
        return dict(out)
