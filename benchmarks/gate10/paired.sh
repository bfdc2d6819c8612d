#!/usr/bin/env bash
# Session 10 gate comparison through the HIL (issue #20): per gate seed S, the sampled gate and
# the heuristic (age > 12 -> fast) run side by side (two `edgerl hil` at once: the same load
# for both), 32 episodes each, on plant seeds OFFSET + S; then the table over every run in OUT.
# Usage (repo root): bash benchmarks/gate10/paired.sh OFFSET OUT
set -euo pipefail
offset=${1:?plant seed offset}; out=${2:?output dir}
kicks=rate=0.004,size=0.8,steps=6,dims=1
py=${PYTHON:-.venv/bin/python}
for s in 0 1 2; do
  for policy in gate:sample age:fast:12; do
    "$py" benchmarks/gate_hil_compare.py --bundles "runs/gate9_ck{S}_bundle" --seeds "$s" \
      --policies "$policy" --episodes 32 --plant-seed-offset "$offset" --kicks "$kicks" \
      --out "$out" > /dev/null &
  done
  wait
done
"$py" benchmarks/gate_hil_compare.py --bundles "runs/gate9_ck{S}_bundle" --seeds 0 1 2 \
  --policies gate:sample age:fast:12 --episodes 32 --plant-seed-offset "$offset" \
  --kicks "$kicks" --out "$out" --json-out "$out/table.json"
