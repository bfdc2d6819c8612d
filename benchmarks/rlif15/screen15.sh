#!/bin/bash
# session 15 screen (benchmarks/rlif15/declared.md): the greedy extraction's margin, fine-tuned
# from each seed's start on session 14c's three recordings, evaluated at plant seed 2000 + S
# (not the declared evaluation's 1000 + S). Appends one JSON line per cell.
P=/work/main/.venv/bin/python
O=runs/rlif15_screen
mkdir -p $O
for S in 0 1 2; do
  R=runs/rlif14c/seed$S/rlif
  for M in 1 2 3; do
    $P -m edgerl.apps finetune --interventions $R/round0/interventions.mcap $R/round1/interventions.mcap \
      $R/round2/interventions.mcap --bundle runs/rlif14c/seed$S/weak --out $O/seed$S/m$M \
      --method rlif --extract greedy --margin $M --steps 2000 --seed $S --json > $O/seed$S/m$M.json &
  done
  wait
done
for S in 0 1 2; do
  for C in weak m1 m2 m3; do
    B=$O/seed$S/$C; [ $C = weak ] && B=runs/rlif14c/seed$S/weak
    $P -m edgerl.apps hil --bundle $B --episodes 20 --seed $((2000 + S)) --planner-latency-ms 100 \
      --no-estop-check --link-probe 0 --json | $P -c "import json,sys; r=json.load(sys.stdin); print(json.dumps({'seed': $S, 'cell': '$C', 'success': r['success'], 'steps': r['steps']}))" >> $O/screen.jsonl
    tail -1 $O/screen.jsonl
  done
done
