#!/bin/bash
# one round on seed 0 with the theta=0.12,flip=2 operator at three noise levels (reusing the seed-0 start)
P=/work/main/.venv/bin/python
for S in 0.3 0.6 0; do
  O=runs/screen_n$S; mkdir -p $O/seed0; cp -r runs/screen_r1/seed0/weak $O/seed0/; cp runs/screen_r1/base_obs.mcap $O/
  python3 -c "import json;d=json.load(open('runs/screen_r1/results.json'));open('$O/seed0/weaken.json','w').write(json.dumps(d['seeds'][0]['weaken_region']))"
  date -u +%T; uptime
  $P benchmarks/rlif_experiment.py --base runs/rlif_base_bundle --seeds 0 --out $O --region "mode=flip,min_angle=0.1,steps=6000,jitter=0.5" --operator "theta=0.12,x=1.5,hold=15,gain=0.6,damping=1,noise=0.2,flip=2" --rounds 1 --collect 20 --explore-std $S --json-out $O/results.json > $O.log 2>&1
  python3 -c "
import json; s=json.load(open('$O/results.json'))['seeds'][0]; r=s['rounds_rlif'][0]
print('noise $S', {k:s[k] for k in ('start','rlif','bc')}, r['collect']['success'], r['collect']['operator_takeovers'], round(s['bc_targets']['sign_agrees_with_base'],2), round(r['finetune']['adv_intervention_start'],3), round(r['finetune']['adv_other'],3))"
done
