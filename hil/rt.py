"""Real-time scheduling for the HIL run: SCHED_FIFO for this process's threads and the
firmware process, a short GIL switch interval so the serial reader thread timestamps a
frame when it arrives, not when a busy thread (the plant's physics) yields the GIL, and a
frozen garbage collector (``gc.collect(); gc.freeze()``: the objects alive at the start are
never scanned again, so a collection during the run walks only what the run allocated)."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["RtState", "realtime", "set_fifo", "set_fifo_process"]

log = logging.getLogger(__name__)

RT_SWITCH_INTERVAL_S = 1e-4


def set_fifo(pid: int, priority: int) -> None:
    """SCHED_FIFO ``priority`` (1..99) for ``pid`` (0: the calling thread; threads it starts
    later inherit it). Raises ``PermissionError`` / ``OSError`` naming the priority."""
    if not 1 <= priority <= 99:
        raise ValueError(f"rt priority must be in 1..99, got {priority}")
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(priority))
    except (OSError, AttributeError) as exc:
        raise OSError(f"cannot set SCHED_FIFO priority {priority} for pid {pid} ({exc}); "
                      "it needs root or CAP_SYS_NICE") from None


def set_fifo_process(pid: int, priority: int) -> None:
    """SCHED_FIFO ``priority`` for every thread of process ``pid`` (QEMU runs the emulated
    core in its own thread, beside the main loop that serves the serial ports)."""
    tasks = sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")) \
        if os.path.isdir(f"/proc/{pid}/task") else [pid]
    for tid in tasks:
        set_fifo(tid, priority)


@dataclass
class RtState:
    """What :func:`realtime` got: ``priority`` asked, ``granted`` (SCHED_FIFO in effect),
    ``error`` (why not, when asked and refused), ``gc_frozen``."""

    priority: int = 0
    granted: bool = False
    error: str = ""
    gc_frozen: bool = False

    def as_dict(self) -> dict[str, object]:
        """The ``rt_*`` keys of ``edgerl hil --json``."""
        return {"rt_granted": self.granted, "rt_error": self.error or None,
                "gc_frozen": self.gc_frozen}


@contextlib.contextmanager
def realtime(priority: int) -> Iterator[RtState]:
    """Within the block: the calling thread (and threads it starts) at SCHED_FIFO
    ``priority``, a 0.1 ms GIL switch interval and a frozen GC; all restored on exit.
    Where SCHED_FIFO is refused (no root / CAP_SYS_NICE) the block runs with normal
    scheduling (logged; ``RtState.granted`` False) and keeps the rest. 0: no change."""
    state = RtState(priority=max(priority, 0))
    if priority <= 0:
        yield state
        return
    old_policy = os.sched_getscheduler(0)
    old_param = os.sched_getparam(0)
    old_interval = sys.getswitchinterval()
    try:
        set_fifo(0, priority)
        state.granted = True
    except OSError as exc:
        state.error = str(exc)
        log.warning("running without real-time scheduling: %s", exc)
    sys.setswitchinterval(RT_SWITCH_INTERVAL_S)
    gc.collect()
    gc.freeze()
    state.gc_frozen = True
    try:
        yield state
    finally:
        gc.unfreeze()
        sys.setswitchinterval(old_interval)
        if state.granted:
            os.sched_setscheduler(0, old_policy, old_param)
