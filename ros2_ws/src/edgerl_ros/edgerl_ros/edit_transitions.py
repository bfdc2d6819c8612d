"""``TransitionRecording``: the edit node's own recording of what its loop did, for
``edgerl finetune --interventions``.

With the node parameter ``transitions_file`` set (``edgerl deploy --record-transitions F``),
the configured node turns on :meth:`EditLoop.log_transitions` (a preallocated ring; the tick
only copies into it) and this object drains the ring into an
:class:`~edgerl.intervention_log.InterventionRecorder` -- the same JSON-MCAP (``loop/tick``,
``operator/intervention``) that ``edgerl hil --record`` writes -- off the tick path: from a
node timer every :data:`DRAIN_PERIOD_S`, at each episode reset and when the node is cleaned
up or shut down (SIGINT/SIGTERM end in :meth:`close`, which writes the rest and finishes the
file). The operator records the node accepted on ``operator/intervention`` go in beside the
ticks, stamped on the loop's clock like the ticks.

A reconfigure (cleanup, configure) starts the file again.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from edgerl.intervention import Intervention
from edgerl.intervention_log import InterventionRecorder

__all__ = ["DRAIN_PERIOD_S", "TransitionRecording"]

log = logging.getLogger(__name__)

#: How often the node timer moves logged ticks into the file (s). The ring holds 32768
#: ticks: 655 s at 50 Hz, 33 s at 1 kHz, so a drain every half second never loses a tick.
DRAIN_PERIOD_S = 0.5


class TransitionRecording:
    """Logged ticks and accepted interventions of one configured edit loop into one file.

    Args:
        path: Output ``.mcap``.
        loop: The configured :class:`~edgerl.runtime.edit_loop.EditLoop` (its transition log
            is turned on here).
        metadata: The file's ``edgerl`` metadata (bundle, node).

    Raises:
        OSError: the file cannot be created (the node's configure then fails, naming it).
    """

    def __init__(self, path: str | Path, loop: Any, metadata: dict[str, str]) -> None:
        self._lock = threading.Lock()  # the timer, the intervention callback and a composed
        # robot's thread (episode resets) all write
        self.recorder = InterventionRecorder(path, metadata)
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
