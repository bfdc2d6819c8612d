#!/bin/bash
# session 15c RLIF run (declared in benchmarks/rlif15/declared_c.md): run 15b with 5 rounds; each
# round from the start (--from-start) with the screen-selected greedy options: `bash run15b.sh "ARGS"`;
# the same base, base recording, starts, operator, seeds
A="--margin 3"  # 15b's screen-selected options
P=/work/main/.venv/bin/python
O=runs/rlif15c
mkdir -p $O
cp runs/rlif14/base_obs.mcap $O/
for S in 0 1 2; do
  mkdir -p $O/seed$S; cp -r runs/rlif14/seed$S/weak $O/seed$S/; cp runs/rlif14/seed$S/weaken.json $O/seed$S/
  # rounds 0-2 are 15b's (the chain reuses a finished round); rounds 3 and 4 run here
  mkdir -p $O/seed$S/rlif; cp -r runs/rlif15b/seed$S/rlif/round{0,1,2} $O/seed$S/rlif/
done
for S in 0 1 2; do
  $P benchmarks/rlif_experiment.py --base runs/rlif_base_bundle --seeds $S --out $O \
    --region "mode=flip,min_angle=0.1,steps=6000,jitter=0.5" \
    --operator "theta=0.12,x=1.5,hold=15,gain=0.6,damping=1,noise=0.2,flip=3,bangbang=1" \
    --rounds 5 --collect 20 --explore-std 0.6 --controls --nice --from-start \
    --rlif-args "--method rlif --extract greedy $A" \
    --json-out $O/results_seed$S.json > $O/seed$S.log 2>&1 &
  sleep 20
done
wait
$P benchmarks/rlif_reeval.py --out $O --base runs/rlif_base_bundle --seeds 0 1 2 --only weak rlif/round4/bundle bc --json-out $O/reeval.json
$P benchmarks/rlif_reeval.py --out $O --base runs/rlif_base_bundle --seeds 0 1 2 --only weak rlif/round4/bundle bc --json-out $O/reeval2.json
