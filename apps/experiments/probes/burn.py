"""A CPU burner standing in for a planner beside a loop: burns BURN_MS of CPU in every
PERIOD_MS (hashlib, which releases the GIL like a model's inference), for SECONDS, at
SCHED_FIFO PRIORITY (default 48; 0 = normal scheduling, as a planner process runs).
Usage: ``python -m edgerl.apps.experiments.probes.burn SECONDS [BURN_MS PERIOD_MS [PRIORITY]]``."""

from __future__ import annotations

import hashlib
import os
import sys
import time


def main() -> None:
    seconds = float(sys.argv[1])
    burn_s = float(sys.argv[2]) * 1e-3 if len(sys.argv) > 2 else 0.070
    period_s = float(sys.argv[3]) * 1e-3 if len(sys.argv) > 3 else 0.100
    priority = int(sys.argv[4]) if len(sys.argv) > 4 else 48
    if priority:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        except (AttributeError, OSError) as exc:
            print(f"burn: no SCHED_FIFO ({exc}); burning at normal priority",
                  file=sys.stderr)
    block = b"x" * 4096
    end_all = time.perf_counter() + seconds
    while time.perf_counter() < end_all:
        t = time.perf_counter()
        end = t + burn_s
        while time.perf_counter() < end:
            hashlib.sha256(block)
        time.sleep(max(0.0, t + period_s - time.perf_counter()))


if __name__ == "__main__":
    main()
