"""Per-tick trace of one ``edgerl bench loop`` run in this process:
which ticks missed, by a late wake-up or a long compute, and whether a planner call was
running then (burn planner in a thread).

Usage (repo root): ``python -m edgerl.apps.experiments.probes.tick_trace --bundle B --rate 1000
--seconds 10 --warmup 0.5 --rt-priority 50 --planner burn --planner-latency-ms 70
--planner-period-ms 100`` (any ``edgerl bench loop`` flags but ``--json``).
Prints the loop thread's tid, then one line per tick that woke > 600 us late or computed
> 600 us: (tick, late us, compute us, in a planner call or idle, ms since the last call
started, the deadline on CLOCK_MONOTONIC, s: ``perf record -k CLOCK_MONOTONIC`` stamps match).
The planner calls are timed only for the burn planner in a thread; with
``--planner-process`` the column says "idle".
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time

import numpy as np

import edgerl.apps.cli as cli
from edgerl.runtime import metrics as loop_metrics
from edgerl.runtime.planners import fakes

STAMPS = np.zeros(1 << 18)
COUNT = [0]
LOOP_TID = [0]
INSTANCES: list = []
CALLS: list[tuple[float, float]] = []
_reset, _record, _plan = (loop_metrics.LoopMetrics.reset, loop_metrics.LoopMetrics.record,
                          fakes.BurnPlanner.plan)
clock = time.perf_counter


def reset(self) -> None:
    _reset(self)
    INSTANCES.append(self)
    COUNT[0] = 0


def record(self, late_s, *args, **kwargs) -> None:
    STAMPS[COUNT[0] % STAMPS.size] = clock()
    if not COUNT[0]:
        import threading

        LOOP_TID[0] = threading.get_native_id()
    COUNT[0] += 1
    _record(self, late_s, *args, **kwargs)


def plan(self, *args, **kwargs):
    t0 = clock()
    out = _plan(self, *args, **kwargs)
    CALLS.append((t0, clock()))
    return out


def main() -> None:
    loop_metrics.LoopMetrics.reset = reset
    loop_metrics.LoopMetrics.record = record
    fakes.BurnPlanner.plan = plan
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        cli.main(["bench", "loop", *sys.argv[1:], "--json"])
    summary = json.loads(buf.getvalue())
    m = INSTANCES[-1]
    n = min(m.ticks, STAMPS.size)
    late, comp, stamps = m._late[:n] * 1e6, m._compute[:n] * 1e6, STAMPS[:n]
    print(f"misses {summary['deadline_misses']}, skipped {summary['skipped_ticks']}, loop thread "
          f"tid {LOOP_TID[0]}")
    calls = np.array(CALLS) if CALLS else np.zeros((0, 2))
    starts, ends = calls[:, 0], calls[:, 1]
    inside = 0
    for i in np.flatnonzero((late > 600) | (comp > 600)):
        t = stamps[i] - (late[i] + comp[i]) * 1e-6  # ~ the tick's deadline
        j = int(np.searchsorted(starts, t)) - 1
        during = j >= 0 and t <= ends[j]
        inside += during
        since = f"{(t - starts[j]) * 1e3:.1f}" if j >= 0 else "-"
        print(i, round(late[i]), round(comp[i]), "in-call" if during else "idle", since,
              f"deadline {t:.6f}")
    if starts.size:
        busy = float(np.sum(ends - starts) / (ends[-1] - starts[0]))
        print(f"planner busy {busy:.0%} of the time")


if __name__ == "__main__":
    main()
