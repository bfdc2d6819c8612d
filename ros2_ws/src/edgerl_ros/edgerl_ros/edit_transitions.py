"""``TransitionRecording``: the edit node's own recording of what its loop did, for
``edgerl finetune --interventions``.

With the node parameter ``transitions_file`` set (``edgerl deploy --record-transitions F``),
the configured node turns on :meth:`EditLoop.log_transitions` (a preallocated ring; the tick
only copies into it) and this object drains the ring into an
:class:`~edgerl.contract.intervention_log.InterventionRecorder` -- the same JSON-MCAP
(``loop/tick``,
``operator/intervention``) that ``edgerl hil --record`` writes -- off the tick path: from a
node timer every :func:`drain_period_s` (a few ticks' worth), at each episode reset and
when the node is cleaned up or shut down (SIGINT/SIGTERM end in :meth:`close`, which writes
the rest and finishes the file). The operator records the node accepted on
``operator/intervention`` go in beside the ticks, stamped on the loop's clock like them.

A reconfigure (cleanup, configure) starts the file again.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from edgerl.contract.intervention import Intervention
from edgerl.contract.intervention_log import InterventionRecorder
from edgerl_ros.record_output import check_output

__all__ = ["DRAIN_ROWS", "TransitionRecording", "drain_period_s"]

log = logging.getLogger(__name__)

#: Ticks per timer drain the period aims at: writing a row costs ~30 us (JSON + zstd MCAP),
#: and a drain runs on the node's executor thread, where the inline state trigger ticks, so
#: a drain must stay short (16 rows: ~0.5 ms; docs/interventions.md has the measurement).
DRAIN_ROWS = 16


def drain_period_s(rate_hz: float) -> float:
    """Timer period (s) for a loop at ``rate_hz``: :data:`DRAIN_ROWS` ticks, within
    [0.01, 0.5] s (0.32 s at 50 Hz, 16 ms at 1 kHz; the 32768-tick ring is never close)."""
    return min(0.5, max(0.01, DRAIN_ROWS / float(rate_hz)))


class TransitionRecording:
    """Logged ticks and accepted interventions of one configured edit loop into one file.

    Args:
        path: Output ``.mcap``.
        loop: The configured :class:`~edgerl.runtime.edit_loop.EditLoop` (its transition log
            is turned on here).
        metadata: The file's ``edgerl`` metadata (bundle, node).

    Raises:
        ValueError: the file cannot be created (message names the path and why; the node's
            configure then fails with it). An existing file is overwritten.
    """

    def __init__(self, path: str | Path, loop: Any, metadata: dict[str, str]) -> None:
        self._lock = threading.Lock()  # the timer, the intervention callback and a composed
        # robot's thread (episode resets) all write
        check_output(Path(path), force=True)  # RecordError (a ValueError) naming the reason
        try:
            self.recorder = InterventionRecorder(path, metadata)
        except OSError as exc:
            raise ValueError(f"{path}: cannot write it ({exc})") from exc
        self.log = loop.transitions if loop.transitions is not None else loop.log_transitions()

    @property
    def path(self) -> Path:
        return self.recorder.path

    def write_intervention(self, iv: Intervention) -> None:
        """An operator record the loop accepted (stamp on the loop's clock)."""
        with self._lock:
            if not self.recorder.closed:
                self.recorder.write_intervention(iv)

    def drain(self) -> int:
        """Move the ticks logged since the last drain into the file; returns how many."""
        with self._lock:
            if self.recorder.closed:
                return 0
            rows = self.log.drain()
            if len(rows["t"]):
                self.recorder.write_ticks(rows)
            return len(rows["t"])

    def close(self) -> None:
        """Write the remaining ticks and finish the file (idempotent)."""
        self.drain()
        with self._lock:
            if not self.recorder.closed:
                self.recorder.close()
                log.info("transitions: %d ticks, %d interventions (%d ticks lost to the "
                         "ring) in %s", self.recorder.ticks, self.recorder.interventions,
                         self.log.dropped, self.path)

    def counts(self) -> dict[str, int]:
        """Diagnostics: ticks and interventions written, ticks lost to the ring."""
        return {"transitions_recorded": self.recorder.ticks,
                "transitions_interventions": self.recorder.interventions,
                "transitions_dropped": self.log.dropped}
