"""Process facts the soak samples: resident memory from ``/proc`` and whether SCHED_FIFO is
permitted here."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

__all__ = ["RssTrack", "fifo_permitted", "rss_mb"]


def rss_mb(pid: int) -> float:
    """Resident set size of ``pid`` (MiB) from ``/proc/<pid>/status``; NaN if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except (OSError, ValueError, IndexError):
        pass
    return float("nan")


@dataclass
class RssTrack:
    """RSS of one role (a node, or the soak itself) over the run, per process incarnation.

    ``growth_mb`` is the largest (last - first) over incarnations that were sampled at least
    twice: a restarted planner starts a new baseline. ``growth_2nd_half_mb`` is the same over
    each incarnation's second half of samples (a leak keeps growing; start-up allocation
    does not). Samples of a process younger than ``warmup_s`` (loading its model) are not
    kept.
    """

    warmup_s: float = 5.0
    samples: dict[int, list[float]] = field(default_factory=dict)  # pid -> MiB over time
    first_seen: dict[int, float] = field(default_factory=dict)  # pid -> monotonic s

    def add(self, pid: int, mb: float, now: float) -> None:
        born = self.first_seen.setdefault(pid, now)
        if mb == mb and now - born >= self.warmup_s:  # not NaN, past its warm-up
            self.samples.setdefault(pid, []).append(mb)

    def summary(self) -> dict[str, float | int]:
        runs = [s for s in self.samples.values() if s]
        if not runs:
            return {"processes": 0}
        grown = [s[-1] - s[0] for s in runs if len(s) > 1]
        late = [s[-1] - s[len(s) // 2] for s in runs if len(s) > 1]
        last = runs[-1]
        return {"processes": len(runs), "first_mb": round(runs[0][0], 1),
                "last_mb": round(last[-1], 1), "peak_mb": round(max(max(s) for s in runs), 1),
                "growth_mb": round(max(grown), 2) if grown else 0.0,
                "growth_2nd_half_mb": round(max(late), 2) if late else 0.0}


def fifo_permitted(priority: int) -> bool:
    """Whether this process may use SCHED_FIFO ``priority`` (tried on a scratch thread)."""
    if priority <= 0 or not hasattr(os, "sched_setscheduler"):
        return False
    ok: list[bool] = []

    def probe() -> None:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
            ok.append(True)
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        except (OSError, PermissionError):
            ok.append(False)

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout=5.0)
    return bool(ok and ok[0])
