"""The edit loop's ports: the observation slot it reads and the command sink it writes.

:class:`ObservationSlot` is a latest-value slot filled by a sensor thread and read by the loop
and the planner client; :class:`CommandSink` is where each tick's command goes (ROS 2
publisher, serial link...); a sink raises :class:`TransportDown` when its link is not up.
"""

from __future__ import annotations

import threading
from typing import Protocol

import numpy as np

__all__ = ["CommandSink", "ObservationSlot", "TransportDown"]


class TransportDown(ConnectionError):
    """Raised by a :class:`CommandSink` whose transport is not connected."""


class CommandSink(Protocol):
    """Where commands go (ROS 2 publisher, serial link...).

    ``sink(command, t)``: ``command`` ``(A,)`` float32 is a reused buffer (copy it to keep
    it); ``t`` is the tick time (monotonic s). Return ``False`` or raise
    :class:`ConnectionError`/``OSError`` when the transport is down; the loop counts it and
    goes on.
    """

    def __call__(self, command: np.ndarray, t: float) -> bool | None: ...


class ObservationSlot:
    """Latest-value slot for the robot observation: written by a sensor thread, read by the
    loop and the planner client (copy under a short lock; no allocation).

    Before the first :meth:`write` it holds NaN (the loop treats that as a non-finite input).
    """

    def __init__(self, dim: int) -> None:
        self._buf = np.full(dim, np.nan, np.float32)
        self._t = float("nan")
        self.seq = 0
        self._lock = threading.Lock()
        self._new = threading.Condition(self._lock)  # a state-triggered loop waits on it

    @property
    def dim(self) -> int:
        """Observation size O."""
        return int(self._buf.shape[0])

    def write(self, obs: np.ndarray, t: float) -> None:
        """Store ``obs`` ``(O,)`` taken at monotonic time ``t``."""
        with self._new:
            np.copyto(self._buf, obs, casting="same_kind")
            self._t = t
            self.seq += 1
            self._new.notify_all()

    def wait_newer(self, seq: int, timeout: float) -> bool:
        """Block until an observation newer than ``seq`` is written (True) or ``timeout``
        seconds pass (False)."""
        with self._new:
            return self._new.wait_for(lambda: self.seq != seq, timeout)

    @property
    def last_t(self) -> float:
        """Time (monotonic s) of the newest observation."""
        return self._t

    def read_into(self, out: np.ndarray) -> tuple[float, int]:
        """Copy the newest observation into ``out``; returns ``(t, seq)``."""
        with self._lock:
            np.copyto(out, self._buf)
            return self._t, self.seq
