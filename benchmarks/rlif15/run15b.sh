#!/bin/bash
# session 15b RLIF run (declared in benchmarks/rlif15/declared_b.md): run 15 refitting each
# round from the start (--from-start) with the screen-selected greedy options: `bash run15b.sh "ARGS"`;
# the same base, base recording, starts, operator, seeds
A=${1:?usage: run15b.sh "FINETUNE ARGS", the variant the screen selected}
P=/work/main/.venv/bin/python
O=runs/rlif15b
mkdir -p $O
cp runs/rlif14/base_obs.mcap $O/
for S in 0 1 2; do
  mkdir -p $O/seed$S; cp -r runs/rlif14/seed$S/weak $O/seed$S/; cp runs/rlif14/seed$S/weaken.json $O/seed$S/
done
for S in 0 1 2; do
  $P benchmarks/rlif_experiment.py --base runs/rlif_base_bundle --seeds $S --out $O \
    --region "mode=flip,min_angle=0.1,steps=6000,jitter=0.5" \
    --operator "theta=0.12,x=1.5,hold=15,gain=0.6,damping=1,noise=0.2,flip=3,bangbang=1" \
    --rounds 3 --collect 20 --explore-std 0.6 --controls --nice --from-start \
    --rlif-args "--method rlif --extract greedy $A" \
    --json-out $O/results_seed$S.json > $O/seed$S.log 2>&1 &
  sleep 20
done
wait
$P benchmarks/rlif_reeval.py --out $O --base runs/rlif_base_bundle --seeds 0 1 2 --only weak rlif/round2/bundle bc --json-out $O/reeval.json
$P benchmarks/rlif_reeval.py --out $O --base runs/rlif_base_bundle --seeds 0 1 2 --only weak rlif/round2/bundle bc --json-out $O/reeval2.json
