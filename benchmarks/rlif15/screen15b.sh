#!/bin/bash
# session 15b screen (benchmarks/rlif15/declared_b.md): greedy with 3 critics that must agree,
# margins 2 and 3, from each seed's start on session 14c's three recordings, evaluated at plant
# seed 2000 + S. Appends one JSON line per cell to runs/rlif15_screen/screen_b.jsonl.
P=/work/main/.venv/bin/python
O=runs/rlif15_screen
for S in 0 1 2; do
  R=runs/rlif14c/seed$S/rlif
  mkdir -p $O/seed$S
  for M in 2 3; do
    $P -m edgerl.apps finetune --interventions $R/round0/interventions.mcap $R/round1/interventions.mcap \
      $R/round2/interventions.mcap --bundle runs/rlif14c/seed$S/weak --out $O/seed$S/k3m$M \
      --method rlif --extract greedy --critics 3 --margin $M --steps 2000 --seed $S --json \
      > $O/seed$S/k3m$M.json &
  done
  wait
done
for S in 0 1 2; do
  for C in k3m2 k3m3; do
    $P -m edgerl.apps hil --bundle $O/seed$S/$C --episodes 20 --seed $((2000 + S)) --planner-latency-ms 100 \
      --no-estop-check --link-probe 0 --json | $P -c "import json,sys; r=json.load(sys.stdin); print(json.dumps({'seed': $S, 'cell': '$C', 'success': r['success'], 'steps': r['steps']}))" >> $O/screen_b.jsonl
    tail -1 $O/screen_b.jsonl
  done
done
