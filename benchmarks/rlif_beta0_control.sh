#!/bin/bash
# RLIF with --beta 0 (control) on the recordings of a benchmarks/rlif_experiment.py run.
# Usage: PY=python benchmarks/rlif_beta0_control.sh runs/rlif_bias   (writes DIR/seedS/rlif_beta0, eval_beta0.json)
set -e
D=$1
PY=${PY:-python}
SEEDS=${SEEDS:-0 1 2}
for S in $SEEDS; do
  $PY -m edgerl finetune --interventions $D/seed$S/interventions.mcap --bundle $D/seed$S/weak --out $D/seed$S/rlif_beta0 --method rlif --beta 0 --steps 2000 --seed $S --json > $D/seed$S/ft_beta0.json
  hil="$PY -m edgerl hil --bundle $D/seed$S/rlif_beta0 --episodes 20 --seed $((1000+S)) --planner-latency-ms 100.0 --no-estop-check --link-probe 0 --json"
  $hil > $D/seed$S/eval_beta0.json || $hil > $D/seed$S/eval_beta0.json  # one retry: a HIL start can fail on a loaded machine
  echo "seed $S: $(python3 -c "import json;print(json.load(open('$D/seed$S/eval_beta0.json'))['success'])")"
done
