#!/bin/bash
# session 9 full run: one process per seed (in parallel), same out dir
P=/work/main/.venv/bin/python
O=runs/rlif9
mkdir -p $O/seed0; cp runs/screen_r1/base_obs.mcap $O/   # the base recording (seed 500), as the benchmark would make it
for S in 0 1 2; do
  $P benchmarks/rlif_experiment.py --base runs/rlif_base_bundle --seeds $S --out $O \
    --region "mode=flip,min_angle=0.1,steps=6000,jitter=0.5" \
    --operator "theta=0.12,x=1.5,hold=15,gain=0.6,damping=1,noise=0.2,flip=2" \
    --rounds 3 --collect 20 --explore-std 0.6 --no-noise-control --eval-rounds --controls --nice \
    --json-out $O/results_seed$S.json > $O/seed$S.log 2>&1 &
  sleep 20
done
wait
