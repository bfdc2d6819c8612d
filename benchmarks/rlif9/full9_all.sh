#!/bin/bash
# session 9, declared before it ran: the rounds chain with RLIF over ALL steps (--actor-data all)
# as its method (the post-hoc same-data fit pointed there); otherwise full9.sh's settings.
P=/work/main/.venv/bin/python
O=runs/rlif9all
mkdir -p $O
if [ ! -f runs/rlif_base_bundle/manifest.json ]; then
  nice -n 15 $P -m edgerl.apps train cartpole --method edit --delay-steps 5 --iterations 300 \
    --stop-at-success 0.98 --seed 0 --out runs/rlif_base_run --json > $O/base_train.json
  nice -n 15 $P -m edgerl.apps export runs/rlif_base_run --out runs/rlif_base_bundle > $O/base_export.log 2>&1
fi
for S in 0 1 2; do
  $P benchmarks/rlif_experiment.py --base runs/rlif_base_bundle --seeds $S --out $O \
    --region "mode=flip,min_angle=0.1,steps=6000,jitter=0.5" \
    --operator "theta=0.12,x=1.5,hold=15,gain=0.6,damping=1,noise=0.2,flip=2" \
    --rounds 3 --collect 20 --explore-std 0.6 --rlif-args "--method rlif --actor-data all" \
    --controls --nice --json-out $O/results_seed$S.json > $O/seed$S.log 2>&1 &
  sleep 20
done
wait
