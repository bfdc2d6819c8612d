#!/bin/bash
# operator screen: plant seed 0, the seed-0 region-flip start, 20 episodes each
P=/work/main/.venv/bin/python
W=runs/screen_r1/seed0/weak
H="$P -m edgerl.apps hil --bundle $W --episodes 20 --seed 0 --planner-latency-ms 100 --no-estop-check --link-probe 0 --json"
OP="theta=0.2,x=1.5,hold=15,gain=0.6,damping=1,noise=0.2"
run() { name=$1; shift; date -u +%T; uptime; $H "$@" > runs/opscreen_$name.json 2>/dev/null; python3 -c "import json;d=json.load(open('runs/opscreen_$name.json'));print('$name', d['success'], d.get('operator_takeovers'), d['steps'])"; }
run alone
run mild --operator "$OP,seed=0"
run flip2 --operator "$OP,flip=2,seed=0"
run flip1 --operator "$OP,flip=1,seed=0"
run alone_n02 --explore-std 0.2
run mild_n03 --operator "$OP,seed=0" --explore-std 0.3
run flip2_n03 --operator "$OP,flip=2,seed=0" --explore-std 0.3
