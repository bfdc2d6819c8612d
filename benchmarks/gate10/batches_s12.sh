#!/usr/bin/env bash
# Session 12's three batches for the declared third look (benchmarks/gate10/declared_s12.md), one after another.
set -euo pipefail
for b in k:3600 l:3700 m:3800; do
  name=${b%%:*}; offset=${b##*:}
  echo "batch ${name^^} (plant seeds ${offset} + S) start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  bash benchmarks/gate10/paired.sh "$offset" "runs/gate12_hil_${name}"
  echo "batch ${name^^} end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
done
