#!/bin/bash
# `edgerl deploy` state->command e2e at 50 and 200 Hz: the state trigger composed with the sim
# robot in one process (--compose), the state trigger across processes with and without
# SCHED_FIFO (--rt-priority), and the clock trigger; each followed by `edgerl bench loop` at
# the same rate, priority and trigger (state: a sensor thread's states wake it) with a planner
# process feeding chunks (the tick-compute reference: the network runs on every tick, as in
# the graph), and per rate the bare rclpy
# round trip between two processes at that pace (benchmarks/ros2_roundtrip.py: the transport
# floor of the cross-process rows), all in the same minutes.
# Usage: benchmarks/deploy_trigger.sh [OUT_DIR] [SECONDS]   (numbers: docs/ros2.md;
#        benchmarks/deploy_trigger_table.py OUT_DIR prints the table)
# Environment: PY (default .venv/bin/python), RATES (default "50 200"), CONFIGS (default
# "state:80:compose state:80:sep state:0:sep clock:0:sep", each trigger:rt_priority:mode),
# REFS (default 1): `bench loop` reference runs before and after each deploy.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/deploy_trigger}
SECS=${2:-8}
mkdir -p "$OUT"
B=$OUT/cartpole_bundle
PY=${PY:-.venv/bin/python}
(${PY} -c "
from pathlib import Path
from tests.helpers.task_bundles import write_task_bundle
write_task_bundle(Path('$B'))")
for hz in ${RATES:-50 200}; do
  period_ms=$(python3 -c "print(1000 / $hz)")
  ROS_DOMAIN_ID=${EDGERL_BENCH_DOMAIN:-221} ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST \
    ${PY} benchmarks/ros2_roundtrip.py --n 500 --period-ms "$period_ms" --json \
    > "$OUT/roundtrip_$hz.json"
  for cfg in ${CONFIGS:-state:80:compose state:80:sep state:0:sep clock:0:sep}; do
    IFS=: read -r trig rt mode <<< "$cfg"
    tag=${hz}_${trig}_rt${rt}_${mode}
    extra=()
    [ "$mode" = compose ] && extra=(--compose)
    sensor=()  # the reference ticks on the same trigger: a sensor thread's states
    [ "$trig" = state ] && sensor=(--trigger state --sensor thread --sensor-hz $hz)
    bench=(${PY} -m edgerl.apps bench loop --bundle "$B" --seconds 4 --rate $hz
           --planner burn --planner-process --rt-priority "$rt" "${sensor[@]}" --json)
    for k in $(seq 1 "${REFS:-1}"); do  # REFS runs before and after: the reference's spread
      "${bench[@]}" > "$OUT/benchpre$([ "$k" = 1 ] || echo "$k")_$tag.json"
    done
    echo "== $tag, load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/load_$tag.txt"
    ${PY} -m edgerl.apps deploy --bundle "$B" --duration "$SECS" --trigger "$trig" \
      --rate-hz $hz --rt-priority "$rt" "${extra[@]}" --json > "$OUT/deploy_$tag.json" \
      || true  # exit 2: the untrained test bundle does not reach the task's success
    for k in $(seq 1 "${REFS:-1}"); do
      "${bench[@]}" > "$OUT/bench$([ "$k" = 1 ] || echo "post$k")_$tag.json"
    done
  done
done
${PY} benchmarks/deploy_trigger_table.py "$OUT"
