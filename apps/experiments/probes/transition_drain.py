"""Cost of the edit node's transition recording (docs/interventions.md): TransitionLog.append
(in the tick) and one drain of ROWS rows into the JSON-MCAP (the node's timer; 16 = the
edgerl_ros.edit_transitions.DRAIN_ROWS a timer period aims at).

Usage: python -m edgerl.apps.experiments.probes.transition_drain [ROWS]
"""
from __future__ import annotations

import sys
import tempfile
import time

import numpy as np

from edgerl.contract.intervention_log import InterventionRecorder
from edgerl.runtime.transition_log import TransitionLog

D, A = 11, 1  # the cartpole test bundle's edit observation and action
log = TransitionLog(D, A)
x, a = np.zeros(D, np.float32), np.zeros(A, np.float32)
n = 20000
t0 = time.perf_counter()
for i in range(n):
    log.append(x, a, a, a, False, False, 1, i * 0.02)
append_us = (time.perf_counter() - t0) / n * 1e6
log.drain()
rows = int(sys.argv[1]) if len(sys.argv) > 1 else 16
with tempfile.TemporaryDirectory() as d, InterventionRecorder(f"{d}/t.mcap") as rec:
    times = []
    for k in range(200):
        for i in range(rows):
            log.append(x, a, a, a, False, False, 1, (k * rows + i) * 0.02)
        t0 = time.perf_counter()
        rec.write_ticks(log.drain())
        times.append(time.perf_counter() - t0)
times = np.asarray(times) * 1e3
print(f"append {append_us:.2f} us/tick; drain+write {rows} rows: "
      f"p50 {np.percentile(times, 50):.3f} ms p99 {np.percentile(times, 99):.3f} ms (200 drains)")
