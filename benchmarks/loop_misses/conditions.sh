#!/usr/bin/env bash
# Session 12 (issue #22): deadline misses of the bare loop and the edit loop, with and without a
# planner burning CPU beside them, conditions interleaved per repetition, 10 s blocks at 1 kHz,
# SCHED_FIFO 50. Prints "condition misses skipped max_late_us tick_compute_p50_us" per block.
# Usage (repo root, as root for SCHED_FIFO): bash benchmarks/loop_misses/conditions.sh BUNDLE REPS "COND..."
# COND: bare bare_burn bare_burn_w120 bare_burn_other edit_none edit_burnproc noprewarm ssi0
#       thread, and pinned (loop on LOOP_CPU, default 1; planner / burner on PLANNER_CPU, 0):
#       bare_pin_burn edit_proc_pin thread_pin
set -euo pipefail
B=${1:?bundle (e.g. python tests/helpers/task_bundles.py /tmp/b)}; reps=${2:-4}
conds=${3:-"bare bare_burn bare_burn_w120 edit_none edit_burnproc"}
py=${PYTHON:-.venv/bin/python}
loop="$py -m edgerl.apps bench loop --bundle $B --rate 1000 --seconds 10 --warmup 0.5 --rt-priority 50 --json"
burn="--planner burn --planner-latency-ms 70 --planner-period-ms 100"
spin="$py -m edgerl.apps bench spin --seconds 10 --rt-priority 50 --json"
lc=${LOOP_CPU:-1}; pc=${PLANNER_CPU:-0}
pin="--loop-cpus $lc --planner-cpus $pc"
for rep in $(seq "$reps"); do
  for c in $conds; do
    case $c in
      bare) $spin ;;
      bare_burn) "$py" benchmarks/loop_misses/burn.py 11.5 & $spin; wait ;;
      bare_burn_w120) "$py" benchmarks/loop_misses/burn.py 11.5 & $spin --work-us 120; wait ;;
      bare_burn_other) "$py" benchmarks/loop_misses/burn.py 11.5 70 100 0 & $spin; wait ;;
      bare_pin_burn) taskset -c "$pc" "$py" benchmarks/loop_misses/burn.py 11.5 70 100 0 &
                     $spin --loop-cpus "$lc"; wait ;;
      edit_proc_pin) $loop $burn --planner-process $pin ;;
      thread_pin) $loop $burn $pin ;;
      edit_none) $loop --planner none ;;
      edit_burnproc) $loop $burn --planner-process ;;
      noprewarm) $loop $burn --planner-process --prewarm-us 0 ;;
      ssi0) $loop $burn --planner-process --spin-switch-interval-us 0 ;;
      thread) $loop $burn ;;
      *) echo "unknown condition $c" >&2; exit 2 ;;
    esac 2>/dev/null | "$py" -c "
import json, sys
d = json.load(sys.stdin)
print('$rep $c', d['deadline_misses'], d.get('skipped_ticks'), round(d['max_late_us']),
      round(d.get('tick_compute_p50_us', 0)), flush=True)"
  done
done
