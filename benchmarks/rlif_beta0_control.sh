#!/bin/bash
# An extra RLIF variant on the recordings of a benchmarks/rlif_experiment.py run; by default
# the --beta 0 control. Usage: PY=python benchmarks/rlif_beta0_control.sh runs/rlif_bias
# (writes DIR/seedS/rlif_beta0, ft_beta0.json, eval_beta0.json). Another variant:
# NAME=own ARGS="--actor-data own" benchmarks/rlif_beta0_control.sh DIR (DIR/seedS/rlif_own, ...).
set -e
D=$1
PY=${PY:-python}
SEEDS=${SEEDS:-0 1 2}
NAME=${NAME:-beta0}
ARGS=${ARGS:---beta 0}
for S in $SEEDS; do
  $PY -m edgerl.apps finetune --interventions $D/seed$S/interventions.mcap --bundle $D/seed$S/weak --out $D/seed$S/rlif_$NAME --method rlif $ARGS --steps 2000 --seed $S --json > $D/seed$S/ft_$NAME.json
  hil="$PY -m edgerl.apps hil --bundle $D/seed$S/rlif_$NAME --episodes 20 --seed $((1000+S)) --planner-latency-ms 100.0 --no-estop-check --link-probe 0 --json"
  $hil > $D/seed$S/eval_$NAME.json || $hil > $D/seed$S/eval_$NAME.json  # one retry: a HIL start can fail on a loaded machine
  echo "seed $S: $(python3 -c "import json;print(json.load(open('$D/seed$S/eval_$NAME.json'))['success'])")"
done
