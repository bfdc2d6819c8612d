"""``ChunkBuffer``: the thread-safe latest-chunk store between planner and edit loop.

The planner side calls :meth:`ChunkBuffer.push` (merging the new chunk with the rows of the
previous one that overlap it, by a named policy); the loop side calls
:meth:`ChunkBuffer.latest`, which only reads one reference (no lock, no copy): chunks are
immutable, so the loop always sees a whole chunk.

Merge rules (LeRobot's "aggregators"; the merged chunk lives on the new chunk's time grid
``t_i = new.t0 + i * new.dt``, rows of the previous chunk are looked up at the same times).
The rules and their weights are :mod:`edgerl.contract.timing`'s, the same the training wrapper uses:

* ``replace``: the new chunk as it is.
* ``blend``: the new chunk's rows from the arrival step on (``now``) are cross-faded with the
  rows the previous chunk *as planned* (unmerged) still has: the ``k``-th row after arrival
  gets new-chunk weight ``(k + 1) / (B + 1)`` for ``k < B`` (``B = blend_steps``).
* ``average``: ``new_weight * new_i + (1 - new_weight) * old(t_i)`` over the whole overlap
  (runtime only; no training method uses it).

A chunk planned no later than the current one (``t0`` not newer) is dropped, as training
drops a chunk overtaken by a newer one; so is a chunk planned before the last reset.

A merged chunk carries the new chunk's planner intent (the planner's newest belief), as the
training scheduler replaces ``cur_intent`` with each arrival.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.timing import (
    MERGE_RULES,
    TimingSpec,
    chunk_row,
    has_planned_row,
    is_newer,
    merge_weights,
    step_offset,
)

__all__ = ["MERGE_POLICIES", "ChunkBuffer", "MergeConfig", "merge_chunks"]

#: Names accepted by :class:`MergeConfig` (``edgerl.contract.timing.MERGE_RULES``).
MERGE_POLICIES = MERGE_RULES


@dataclass
class MergeConfig:
    """How overlapping chunks are merged: ``policy`` in :data:`MERGE_POLICIES`;
    ``new_weight`` (0..1] is the new chunk's weight for ``average``; ``blend_steps`` (>= 1)
    the blend length B for ``blend`` (a bundle's ``timing.blend_steps``)."""

    policy: str = "replace"
    new_weight: float = 0.5
    blend_steps: int = 0

    def __post_init__(self) -> None:
        if self.policy not in MERGE_POLICIES:
            raise ValueError(f"merge policy {self.policy!r} is not one of "
                             f"{', '.join(MERGE_POLICIES)}")
        if not 0.0 < self.new_weight <= 1.0:
            raise ValueError(f"new_weight must be in (0, 1], got {self.new_weight}")
        if self.policy == "blend" and self.blend_steps < 1:
            raise ValueError("merge policy 'blend' needs blend_steps >= 1 (the bundle's "
                             "timing.blend_steps; build it with MergeConfig.from_timing)")

    @classmethod
    def from_timing(cls, timing: TimingSpec, policy: str = "") -> MergeConfig:
        """The bundle's merge rule (or ``policy`` instead of it, same blend length)."""
        return cls(policy=policy or timing.merge, new_weight=timing.new_weight,
                   blend_steps=timing.blend_steps)


def _overlap(old: ActionChunk, new: ActionChunk, now: float) -> tuple[int, np.ndarray]:
    """``(a, rows)``: the new chunk's rows ``a .. a+n-1``, from the row for ``now`` on, that
    ``old`` still has a planned row for (never its held last row); ``rows`` ``(n, A)`` are
    the old chunk's rows at those times."""
    a = max(0, step_offset(now, new.t0, new.dt)) if np.isfinite(now) else 0
    offsets = [step_offset(float(t), old.t0, old.dt) for t in new.times()[a:]]
    n = 0
    while n < len(offsets) and has_planned_row(offsets[n], old.horizon):
        n += 1
    if n == 0:
        return 0, np.zeros((0, new.action_dim), np.float32)
    rows = [chunk_row(o, old.horizon) for o in offsets[:n]]
    return a, old.actions[np.asarray(rows, dtype=np.int64)]


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
    w = merge_weights(cfg.policy, n, cfg.blend_steps, cfg.new_weight)[:, None]
    merged[a:a + n] = (1.0 - w) * old_rows + w * new.actions[a:a + n]
    meta = dict(new.meta, merged=cfg.policy, overlap_rows=n, overlap_start=a)
    return ActionChunk(actions=merged, t0=new.t0, dt=new.dt, step0=new.step0,
                       obs_time=new.obs_time, source=new.source, meta=meta, intent=new.intent)


class ChunkBuffer:
    """Latest chunk, merged on push; readers never block.

    Attributes:
        version: Incremented on every push (the loop uses it to notice a new chunk).
        pushes: Chunks received.
        reset_t: Start of the current episode (monotonic s; -inf: none). Chunks planned from
            an observation taken before it are refused (see :meth:`reset`).
        dropped_pre_reset: Chunks refused for that reason.
        dropped_old: Chunks refused because the current one was planned later (or at the
            same ``t0``).
        guard: Optional :class:`~edgerl.runtime.input_guard.InputGuard`: a chunk it refuses
            at ``push(chunk, now)`` (too long, stamped ahead, stale, out of limits, an intent
            of the wrong size) is not stored (counted in ``guard.counts()``; the reason in
            :attr:`last_refusal`).
        intent_dim: The planner intent size the loop reads (the manifest's
            ``edit_obs.intent_dim``); a chunk carrying an intent of another size is refused
            with a ``ValueError``, as one with the wrong column count (``None``: unchecked).
    """

    def __init__(self, merge: MergeConfig | TimingSpec | str = "replace",
                 action_dim: int | None = None, guard: Any = None,
                 intent_dim: int | None = None) -> None:
        if isinstance(merge, TimingSpec):
            merge = MergeConfig.from_timing(merge)
        self.merge = merge if isinstance(merge, MergeConfig) else MergeConfig(policy=merge)
        self.action_dim = action_dim
        self.intent_dim = intent_dim
        self._lock = threading.Lock()
        self._chunk: ActionChunk | None = None
        self._raw: ActionChunk | None = None  # the current chunk as planned (unmerged)
        self.dropped_old = 0
        self.version = 0
        self.pushes = 0
        self.reset_t = -np.inf
        self.dropped_pre_reset = 0
        self.guard = guard
        self.last_refusal = ""

    def push(self, chunk: ActionChunk, now: float = -np.inf) -> ActionChunk:
        """Store ``chunk`` merged with the current one (``now``: the push time, s); a chunk
        planned before the last :meth:`reset` is refused and returned unstored."""
        if self.action_dim is not None and chunk.action_dim != self.action_dim:
            raise ValueError(f"chunk has {chunk.action_dim} action columns, the buffer "
                             f"expects {self.action_dim}")
        if self.guard is not None and np.isfinite(now):
            reason = self.guard.check_chunk(chunk, now)
            if reason is not None:
                self.last_refusal = reason
                return chunk
        if (self.intent_dim is not None and chunk.intent is not None
                and chunk.intent_dim != self.intent_dim):
            raise ValueError(f"chunk carries an intent of {chunk.intent_dim} values, the "
                             f"buffer expects {self.intent_dim} (edit_obs.intent_dim)")
        with self._lock:
            if chunk.obs_time < self.reset_t:  # planned in the previous episode
                self.dropped_pre_reset += 1
                return chunk
            if self._raw is not None and not is_newer(chunk.t0, self._raw.t0):
                self.dropped_old += 1
                return chunk
            merged = merge_chunks(self._raw, chunk, self.merge, now)
            self._raw = chunk
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
            self._chunk = self._raw = None
            self.version += 1

    def reset(self, t: float) -> None:
        """An episode restarted at monotonic time ``t``: forget the chunk and refuse chunks
        planned from observations taken before ``t`` (a planner call in flight across the
        reset), as training does at an episode reset."""
        with self._lock:
            self._chunk = self._raw = None
            self.reset_t = float(t)
            self.version += 1
