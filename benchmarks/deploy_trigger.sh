#!/bin/bash
# `edgerl deploy` state->command e2e: the state trigger ticked in the state callback, with and
# without SCHED_FIFO (--rt-priority), and the clock trigger, at 50 and 200 Hz; each followed by
# `edgerl bench loop` at the same rate and priority (the tick-compute reference, same minutes).
# Usage: benchmarks/deploy_trigger.sh [OUT_DIR] [SECONDS]   (numbers: docs/ros2.md;
#        benchmarks/deploy_trigger_table.py OUT_DIR prints the table)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/deploy_trigger}
SECS=${2:-8}
mkdir -p "$OUT"
B=$OUT/cartpole_bundle
(.venv/bin/python -c "
from pathlib import Path
from tests.helpers.task_bundles import write_task_bundle
write_task_bundle(Path('$B'))")
for hz in 50 200; do
  for cfg in state:80 state:0 clock:0; do
    trig=${cfg%%:*}; rt=${cfg##*:}
    tag=${hz}_${trig}_rt${rt}
    echo "== $tag, load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/load_$tag.txt"
    .venv/bin/python -m edgerl deploy --bundle "$B" --duration "$SECS" --trigger $trig \
      --rate-hz $hz --rt-priority $rt --json > "$OUT/deploy_$tag.json" || true  # exit 2: no success
    .venv/bin/python -m edgerl bench loop --bundle "$B" --seconds 4 --rate $hz --planner none \
      --rt-priority $rt --json > "$OUT/bench_$tag.json"
  done
done
.venv/bin/python benchmarks/deploy_trigger_table.py "$OUT"
