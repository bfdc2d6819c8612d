#!/bin/bash
# `edgerl deploy` state->command e2e with the state and the clock trigger at 50 and 200 Hz,
# each followed by `edgerl bench loop` at the same rate (tick compute reference).
# Usage: benchmarks/deploy_trigger.sh [OUT_DIR]   (numbers: docs/ros2.md)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/deploy_trigger}
mkdir -p "$OUT"
B=$OUT/cartpole_bundle
(cd tests/ros2_ws && ../../.venv/bin/python -c "
import sys; sys.path.insert(0, '../runtime')
from pathlib import Path
from ros_bundles import write_task_bundle
write_task_bundle(Path('$B'))")
for hz in 50 200; do
  for trig in state clock; do
    echo "== $hz Hz $trig, load: $(cut -d' ' -f1-3 /proc/loadavg)"
    .venv/bin/python -m edgerl deploy --bundle "$B" --duration 8 --trigger $trig \
      --rate-hz $hz --json > "$OUT/deploy_${hz}_${trig}.json"
    .venv/bin/python -m edgerl bench loop --bundle "$B" --seconds 4 --rate $hz --planner none \
      --json > "$OUT/bench_${hz}_${trig}.json"
  done
done
