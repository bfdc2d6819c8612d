"""``ChunkBuffer``: the thread-safe latest-chunk store between planner and edit loop.

The planner side calls :meth:`ChunkBuffer.push` (merging the new chunk with the rows of the
previous one that overlap it, by a named policy); the loop side calls
:meth:`ChunkBuffer.latest`, which only reads one reference (no lock, no copy): chunks are
immutable, so the loop always sees a whole chunk.

Merge policies (LeRobot's "aggregators"; the merged chunk lives on the new chunk's time grid
``t_i = new.t0 + i * new.dt``, rows of the old chunk are looked up at the same times):

* ``replace``: the new chunk as it is.
* ``blend``: real-time-chunking-like linear cross-fade over the overlap: with ``n`` overlapping
  rows, new row ``i < n`` becomes ``(1 - w_i) * old(t_i) + w_i * new_i`` with
  ``w_i = (i + 1) / (n + 1)``; rows after the overlap are the new chunk's.
* ``average``: over the overlap ``new_weight * new_i + (1 - new_weight) * old(t_i)``.

Only new rows not yet past at push time (``now``) that the old chunk still covers (before
its end) are merged; the weights count from the first of them. A stale old chunk means no
overlap.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from edgerl.chunk import ActionChunk

__all__ = ["MERGE_POLICIES", "ChunkBuffer", "MergeConfig", "merge_chunks"]

#: Names accepted by :class:`MergeConfig`.
MERGE_POLICIES = ("replace", "blend", "average")


@dataclass
class MergeConfig:
    """How overlapping chunks are merged: ``policy`` in :data:`MERGE_POLICIES`;
    ``new_weight`` (0..1] is the new chunk's weight for ``average``."""

    policy: str = "replace"
    new_weight: float = 0.5

    def __post_init__(self) -> None:
        if self.policy not in MERGE_POLICIES:
            raise ValueError(f"merge policy {self.policy!r} is not one of "
                             f"{', '.join(MERGE_POLICIES)}")
        if not 0.0 < self.new_weight <= 1.0:
            raise ValueError(f"new_weight must be in (0, 1], got {self.new_weight}")


def _overlap(old: ActionChunk, new: ActionChunk, now: float) -> tuple[int, np.ndarray]:
    """``(a, rows)``: the new chunk's rows ``a .. a+n-1`` are not yet past at ``now`` and are
    still covered by ``old``; ``rows`` ``(n, A)`` are the old chunk's rows at those times."""
    t = new.times()
    not_past = t + new.dt > now
    covered = t < old.t_end - 1e-6 * old.dt
    idx = np.flatnonzero(not_past & covered)
    if idx.size == 0:
        return 0, np.zeros((0, new.action_dim), np.float32)
    rows = [old.index_at(float(t[i])) for i in idx]
    return int(idx[0]), old.actions[np.asarray(rows, dtype=np.int64)]


def merge_chunks(old: ActionChunk | None, new: ActionChunk, cfg: MergeConfig,
                 now: float = -np.inf) -> ActionChunk:
    """The chunk to use after ``new`` arrives while ``old`` was active (see module doc)."""
    if old is None or cfg.policy == "replace" or old.action_dim != new.action_dim:
        return new
    a, old_rows = _overlap(old, new, now)
    n = old_rows.shape[0]
    if n == 0:
        return new
    merged = new.actions.copy()
    if cfg.policy == "blend":
        w = (np.arange(1, n + 1, dtype=np.float32) / np.float32(n + 1))[:, None]
    else:
        w = np.full((n, 1), cfg.new_weight, dtype=np.float32)
    merged[a:a + n] = (1.0 - w) * old_rows + w * new.actions[a:a + n]
    meta = dict(new.meta, merged=cfg.policy, overlap_rows=n, overlap_start=a)
    return ActionChunk(actions=merged, t0=new.t0, dt=new.dt, step0=new.step0,
                       obs_time=new.obs_time, source=new.source, meta=meta)


class ChunkBuffer:
    """Latest chunk, merged on push; readers never block.

    Attributes:
        version: Incremented on every push (the loop uses it to notice a new chunk).
        pushes: Chunks received.
        reset_t: Start of the current episode (monotonic s; -inf: none). Chunks planned from
            an observation taken before it are refused (see :meth:`reset`).
        dropped_pre_reset: Chunks refused for that reason.
    """

    def __init__(self, merge: MergeConfig | str = "replace", action_dim: int | None = None) -> None:
        self.merge = merge if isinstance(merge, MergeConfig) else MergeConfig(policy=merge)
        self.action_dim = action_dim
        self._lock = threading.Lock()
        self._chunk: ActionChunk | None = None
        self.version = 0
        self.pushes = 0
        self.reset_t = -np.inf
        self.dropped_pre_reset = 0

    def push(self, chunk: ActionChunk, now: float = -np.inf) -> ActionChunk:
        """Store ``chunk`` merged with the current one (``now``: the push time, s); a chunk
        planned before the last :meth:`reset` is refused and returned unstored."""
        if self.action_dim is not None and chunk.action_dim != self.action_dim:
            raise ValueError(f"chunk has {chunk.action_dim} action columns, the buffer "
                             f"expects {self.action_dim}")
        with self._lock:
            if chunk.obs_time < self.reset_t:  # planned in the previous episode
                self.dropped_pre_reset += 1
                return chunk
            merged = merge_chunks(self._chunk, chunk, self.merge, now)
            self._chunk = merged
            self.version += 1
            self.pushes += 1
        return merged

    def latest(self) -> ActionChunk | None:
        """The current chunk (an immutable object; a single reference read)."""
        return self._chunk

    def clear(self) -> None:
        """Forget the current chunk (the loop then sees "no chunk")."""
        with self._lock:
            self._chunk = None
            self.version += 1

    def reset(self, t: float) -> None:
        """An episode restarted at monotonic time ``t``: forget the chunk and refuse chunks
        planned from observations taken before ``t`` (a planner call in flight across the
        reset), as training does at an episode reset."""
        with self._lock:
            self._chunk = None
            self.reset_t = float(t)
            self.version += 1
