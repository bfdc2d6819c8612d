#!/bin/bash
# one fit from the start on the RLIF chain's 3 recordings (the data BC got): RLIF over all steps / own steps
P=/work/main/.venv/bin/python
for S in 0 1 2; do
  D=runs/rlif9/seed$S
  R="$D/rlif/round0/interventions.mcap $D/rlif/round1/interventions.mcap $D/rlif/round2/interventions.mcap"
  for V in all own; do
    date -u +%T
    nice -n 15 $P -m edgerl.apps finetune --interventions $R --bundle $D/weak --out $D/same_rlif_$V --method rlif --actor-data $V --steps 2000 --seed $S --json > $D/ft_same_$V.json
  done
done
