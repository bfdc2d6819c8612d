#!/bin/bash
P=/work/main/.venv/bin/python
W=runs/screen_r1/seed0/weak
H="$P -m edgerl.apps hil --bundle $W --episodes 20 --seed 0 --planner-latency-ms 100 --no-estop-check --link-probe 0 --json"
run() { name=$1; shift; date -u +%T; uptime; $H "$@" > runs/opscreen_$name.json 2>/dev/null; python3 -c "import json;d=json.load(open('runs/opscreen_$name.json'));print('$name', d['success'], d.get('operator_takeovers'), d['steps'])"; }
run t15flip2 --operator "theta=0.15,x=1.5,hold=15,gain=0.6,damping=1,noise=0.2,flip=2,seed=0"
run t12flip2 --operator "theta=0.12,x=1.5,hold=15,gain=0.6,damping=1,noise=0.2,flip=2,seed=0"
run t15mild --operator "theta=0.15,x=1.5,hold=15,gain=0.6,damping=1,noise=0.2,seed=0"
run t15bb --operator "theta=0.15,x=1.5,hold=15,gain=0.6,damping=1,noise=0.2,bangbang=1,seed=0"
run t12flip2_n03 --operator "theta=0.12,x=1.5,hold=15,gain=0.6,damping=1,noise=0.2,flip=2,seed=0" --explore-std 0.3
