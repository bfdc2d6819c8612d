#!/bin/bash
# controls for the same-data fits: RLIF (all steps) and BC from the start on the NO-NOISE chain's 3 recordings
P=/work/main/.venv/bin/python
for S in 0 1 2; do
  D=runs/rlif9/seed$S
  R="$D/rlif_nonoise/round0/interventions.mcap $D/rlif_nonoise/round1/interventions.mcap $D/rlif_nonoise/round2/interventions.mcap"
  date -u +%T
  nice -n 15 $P -m edgerl.apps finetune --interventions $R --bundle $D/weak --out $D/nn_same_rlif_all --method rlif --actor-data all --steps 2000 --seed $S --json > $D/ft_nn_same_all.json
  nice -n 15 $P -m edgerl.apps finetune --interventions $R --bundle $D/weak --out $D/nn_same_bc --method bc --steps 2000 --seed $S --json > $D/ft_nn_same_bc.json
done
date -u +%T
