#!/bin/bash
# session 14d RLIF run (declared in benchmarks/rlif14/declared_d.md): 14c's chain (unbiased
# target, --anchor 1) from the weaker start calibrated there (region flip from 0.07 rad)
P=/work/main/.venv/bin/python
O=runs/rlif14d
mkdir -p $O
cp runs/rlif14/base_obs.mcap $O/
for S in 0 1 2; do
  $P benchmarks/rlif_experiment.py --base runs/rlif_base_bundle --seeds $S --out $O \
    --region "mode=flip,min_angle=0.07,steps=6000,jitter=0.5" \
    --operator "theta=0.12,x=1.5,hold=15,gain=0.6,damping=1,noise=0.2,flip=3,bangbang=1" \
    --rounds 3 --collect 20 --explore-std 0.6 --controls --nice \
    --rlif-args "--method rlif --actor-data own --anchor 1" \
    --json-out $O/results_seed$S.json > $O/seed$S.log 2>&1 &
  sleep 20
done
wait
$P benchmarks/rlif_reeval.py --out $O --base runs/rlif_base_bundle --seeds 0 1 2 --only weak rlif/round2/bundle bc --json-out $O/reeval.json
$P benchmarks/rlif_reeval.py --out $O --base runs/rlif_base_bundle --seeds 0 1 2 --only weak rlif/round2/bundle bc --json-out $O/reeval2.json
