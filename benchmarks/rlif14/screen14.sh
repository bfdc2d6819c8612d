#!/bin/bash
# session 14 operator screen (declared in benchmarks/rlif14/declared.md): seed-0 start,
# plant seed 0, 20 HIL episodes with exploration noise 0.6, one variant after another.
P=/work/main/.venv/bin/python
O=runs/rlif14
W=$O/seed0/weak
$P - <<'PY'
import sys; sys.path.insert(0, "benchmarks")
from pathlib import Path
import json
import rlif_experiment as r
d = Path("runs/rlif14/seed0"); d.mkdir(parents=True, exist_ok=True)
if not (d / "weak/manifest.json").exists():
    st = r._weaken_region(Path("runs/rlif_base_bundle"), d / "weak",
                          "mode=flip,min_angle=0.1,steps=6000,jitter=0.5",
                          Path("runs/rlif14/base_obs.mcap"), 0)
    (d / "weaken.json").write_text(json.dumps(st))
PY
H="$P -m edgerl.apps hil --bundle $W --episodes 20 --seed 0 --planner-latency-ms 100 --no-estop-check --link-probe 0 --explore-std 0.6 --explore-seed 0 --json"
mkdir -p $O/screen
run() { name=$1; shift; echo "$(date -u +%T) $(cut -d' ' -f1 /proc/loadavg) $name"
  $H --operator "$1" --record $O/screen/$name.mcap > $O/screen/$name.json 2>/dev/null
  $P - "$name" <<'PY'
import sys, json; sys.path.insert(0, "benchmarks")
from pathlib import Path
import rlif_experiment as r
n = sys.argv[1]; o = Path("runs/rlif14/screen")
d = json.load(open(o / f"{n}.json"))
t = r._bc_targets([o / f"{n}.mcap"], Path("runs/rlif_base_bundle"))
row = {"name": n, "success": d["success"], "takeovers": d.get("operator_takeovers"),
       "steps": d["steps"], "override_steps": t["override_steps"],
       "own_steps": d["steps"] - t["override_steps"],
       "sign_agrees_with_base": round(t["sign_agrees_with_base"], 3), "mse_to_base": round(t["mse_to_base"], 3)}
print(json.dumps(row)); open(o / "screen.jsonl", "a").write(json.dumps(row) + "\n")
PY
}
B="x=1.5,hold=15,damping=1,noise=0.2,seed=0"
run bb12f4 "theta=0.12,gain=0.6,flip=4,bangbang=1,$B"
run bb10f4 "theta=0.10,gain=0.6,flip=4,bangbang=1,$B"
run bb12f3 "theta=0.12,gain=0.6,flip=3,bangbang=1,$B"
run g10f4 "theta=0.10,gain=1.0,flip=4,bangbang=0,$B"
run t08f4 "theta=0.08,gain=0.6,flip=4,bangbang=0,$B"
