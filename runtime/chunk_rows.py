"""``ChunkRows``: the chunk rows one tick of the edit loop reads, in a preallocated buffer.

For a tick at time ``t`` whose chunk row is ``row`` (the bundle's ``TimingSpec.row_at``), the
rows are ``row .. row + n_rows - 1`` of the chunk's actions, the last row held past its end:
the same result as :func:`edgerl.contract.edit_obs.select_chunk_rows`, computed with
preallocated index buffers and skipped when chunk and row are unchanged since the last tick.
With ``row_mode="interpolate"`` each row is instead blended linearly with the next by the
position of ``t`` inside row ``row``'s interval.
"""

from __future__ import annotations

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.edit_obs import select_chunk_rows

__all__ = ["ChunkRows"]


class ChunkRows:
    """The ``(n_rows, A)`` float32 rows a tick uses, refilled in place.

    Args:
        n_rows: Rows per tick (the edit observation's ``n_rows``).
        action_dim: Actions per row (``A``).
        row_mode: ``hold`` (the row whose interval contains ``t``) or ``interpolate``.

    Attributes:
        rows: The ``(n_rows, A)`` buffer; the same array for the loop's lifetime (callers
            may keep a reference to it).
    """

    def __init__(self, n_rows: int, action_dim: int, row_mode: str = "hold") -> None:
        self.rows = np.zeros((n_rows, action_dim), np.float32)
        self.interpolate = row_mode == "interpolate"
        self._offsets = np.arange(n_rows, dtype=np.intp)
        self._idx = np.zeros(n_rows, np.intp)
        self._chunk: ActionChunk | None = None  # what `rows` holds (hold mode)
        self._row = -1

    def fill(self, t: float, chunk: ActionChunk, row: int) -> np.ndarray:
        """Rows ``row ..`` of ``chunk`` for time ``t`` (s) into :attr:`rows`; returns it."""
        if self.interpolate:
            n = self.rows.shape[0]
            frac = (t - (chunk.t0 + row * chunk.dt)) / chunk.dt
            frac = min(max(frac, 0.0), 1.0)
            rows = select_chunk_rows(chunk.actions, row, n + 1)
            np.multiply(rows[:n], np.float32(1.0 - frac), out=self.rows)
            self.rows += np.float32(frac) * rows[1:]
            return self.rows
        if chunk is self._chunk and row == self._row:
            return self.rows
        np.add(self._offsets, row, out=self._idx)
        np.take(chunk.actions, self._idx, axis=0, out=self.rows, mode="clip")  # clip: hold last
        self._chunk, self._row = chunk, row
        return self.rows

    def clear(self) -> None:
        """No usable chunk: zero rows (once; a no-op while they are already cleared)."""
        if self._chunk is not None or self._row != -1:
            self.rows[...] = 0.0
            self._chunk, self._row = None, -1
