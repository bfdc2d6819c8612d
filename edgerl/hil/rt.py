"""Real-time scheduling for the HIL run: SCHED_FIFO for this process's threads and the
firmware process, and a short GIL switch interval so the serial reader thread timestamps a
frame when it arrives, not when a busy thread (the plant's physics) yields the GIL."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator

__all__ = ["realtime", "set_fifo", "set_fifo_process"]

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


@contextlib.contextmanager
def realtime(priority: int) -> Iterator[None]:
    """Within the block: the calling thread (and threads it starts) at SCHED_FIFO
    ``priority`` and a 0.1 ms GIL switch interval; both restored on exit. 0: no change."""
    if priority <= 0:
        yield
        return
    old_policy = os.sched_getscheduler(0)
    old_param = os.sched_getparam(0)
    old_interval = sys.getswitchinterval()
    set_fifo(0, priority)
    sys.setswitchinterval(RT_SWITCH_INTERVAL_S)
    try:
        yield
    finally:
        sys.setswitchinterval(old_interval)
        os.sched_setscheduler(0, old_policy, old_param)
