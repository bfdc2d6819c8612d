"""CPU affinity for the real-time threads: keep the edit loop on its own CPU(s), the planner
elsewhere.

On a small machine (a Jetson's 6 cores, this project's 2-vCPU VM) a planner process that burns
a core is moved by the kernel onto whichever CPU looks idle, including the loop's while the
loop sleeps between ticks; the loop then preempts it at every wake-up and runs with the
planner's data in its caches. Pinning the loop thread to one set of CPUs and the planner (its
client thread, and the process it spawns, which inherits the affinity) to another is the usual
real-time practice (with ``isolcpus`` on a robot, to keep other processes off the loop's CPU).

:func:`parse_cpus` reads a list such as ``"1"``, ``"0,2"`` or ``"2-3"``; :func:`check_cpus`
refuses CPUs this process may not use, naming them; :func:`pin_thread` pins the calling thread
(Linux ``sched_setaffinity`` on thread id 0).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable

__all__ = ["allowed_cpus", "check_cpus", "cpu_list", "parse_cpus", "pin_thread"]

log = logging.getLogger(__name__)


def parse_cpus(text: str) -> tuple[int, ...]:
    """CPU numbers from ``"1"``, ``"0,2"``, ``"2-3"`` or ``"0,2-3"`` (ascending, unique);
    ``""`` gives ``()`` (no pinning). A ``ValueError`` names the part it cannot read."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise ValueError(f"CPU list {text!r}: {part!r} is not a CPU number or a range "
                             f"such as 2-3") from None
        if a < 0 or b < a:
            raise ValueError(f"CPU list {text!r}: {part!r} must be N or N-M with 0 <= N <= M")
        cpus.update(range(a, b + 1))
    return tuple(sorted(cpus))


def allowed_cpus() -> set[int]:
    """The CPUs this process may run on (its affinity mask, e.g. a container's cpuset)."""
    if not hasattr(os, "sched_getaffinity"):
        return set(range(os.cpu_count() or 1))
    return set(os.sched_getaffinity(0))


def check_cpus(cpus: Iterable[int], what: str) -> tuple[int, ...]:
    """``cpus`` as a sorted tuple if this process may use every one of them; otherwise a
    ``ValueError`` naming ``what`` (e.g. ``"loop cpus"``), the CPUs it may not use and the
    allowed set. Also refuses when the platform has no ``sched_setaffinity``."""
    out = tuple(sorted({int(c) for c in cpus}))
    if not out:
        return out
    if not hasattr(os, "sched_setaffinity"):
        raise ValueError(f"{what} {list(out)}: this platform cannot pin threads to CPUs "
                         f"(no sched_setaffinity)")
    allowed = allowed_cpus()
    missing = [c for c in out if c not in allowed]
    if missing:
        raise ValueError(f"{what} {list(out)}: CPU {', '.join(map(str, missing))} is not "
                         f"available to this process (allowed: {sorted(allowed)})")
    return out


def cpu_list(text: str, what: str) -> tuple[int, ...]:
    """A user's CPU list (a flag or parameter named ``what``): :func:`parse_cpus`, then
    :func:`check_cpus`; either's ``ValueError`` names the problem."""
    return check_cpus(parse_cpus(text), what)


def pin_thread(cpus: Iterable[int], what: str) -> tuple[int, ...]:
    """Pin the calling thread to ``cpus`` (checked with :func:`check_cpus`); ``()`` leaves it
    alone. Returns the affinity the thread has afterwards (``()`` when unpinned)."""
    out = check_cpus(cpus, what)
    if not out:
        return ()
    os.sched_setaffinity(0, out)
    got = tuple(sorted(os.sched_getaffinity(0)))
    log.info("thread %s pinned to CPU %s (%s)", threading.current_thread().name,
             ",".join(map(str, got)), what)
    return got
