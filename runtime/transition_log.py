"""``TransitionLog``: what the edit loop did each tick, kept for learning from interventions.

One row per tick in which the edit network ran: the edit observation it read ``(D,)``, its
raw output ``(A,)`` (the residual before the bound), the chunk row for now ``(A,)``, the
command executed ``(A,)`` (the operator's during an override), whether an override was in
force, whether one started this tick, the episode index and the tick time (s). Fixed memory:
a ring of ``capacity`` rows, preallocated; the oldest rows are overwritten (``dropped`` counts
them).
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["TRANSITION_FIELDS", "TransitionLog"]

#: Field names of :meth:`TransitionLog.arrays` (and of a recording's ``loop/tick`` channel).
TRANSITION_FIELDS = ("edit_obs", "policy_out", "residual", "chunk_row", "command",
                     "intervened", "start", "episode", "t")


class TransitionLog:
    """Bounded per-tick log (thread-safe: the loop appends, a recorder drains).

    Args:
        obs_dim: D, the edit observation size.
        action_dim: A.
        capacity: Rows kept.
    """

    def __init__(self, obs_dim: int, action_dim: int, capacity: int = 1 << 15) -> None:
        if capacity < 1:
            raise ValueError(f"transition log capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        n = self.capacity
        self._data = {"edit_obs": np.zeros((n, obs_dim), np.float32),
                      "policy_out": np.zeros((n, action_dim), np.float32),
                      "residual": np.zeros((n, action_dim), np.float32),
                      "chunk_row": np.zeros((n, action_dim), np.float32),
                      "command": np.zeros((n, action_dim), np.float32),
                      "intervened": np.zeros(n, bool), "start": np.zeros(n, bool),
                      "episode": np.zeros(n, np.int64), "t": np.zeros(n, np.float64)}
        self._next = 0  # rows ever appended
        self._read = 0  # rows already drained
        self.dropped = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return min(self._next, self.capacity)

    def append(self, edit_obs: np.ndarray, policy_out: np.ndarray, residual: np.ndarray,
               chunk_row: np.ndarray, command: np.ndarray, intervened: bool, start: bool,
               episode: int, t: float) -> None:
        """Add one tick (copies; no allocation). ``policy_out`` (A,) is the network's output,
        ``residual`` (A,) what the loop composed the command from (the output plus any
        exploration noise, policy units, before the ``[-1, 1]`` bound)."""
        with self._lock:
            i = self._next % self.capacity
            d = self._data
            d["edit_obs"][i] = edit_obs
            d["policy_out"][i] = policy_out
            d["residual"][i] = residual
            d["chunk_row"][i] = chunk_row
            d["command"][i] = command
            d["intervened"][i] = intervened
            d["start"][i] = start
            d["episode"][i] = episode
            d["t"][i] = t
            self._next += 1
            if self._next - self._read > self.capacity:
                self._read += 1
                self.dropped += 1

    def drain(self) -> dict[str, np.ndarray]:
        """The rows not drained before, oldest first (copies), keyed by
        :data:`TRANSITION_FIELDS`."""
        with self._lock:
            idx = np.arange(self._read, self._next) % self.capacity
            self._read = self._next
            return {k: v[idx].copy() for k, v in self._data.items()}
