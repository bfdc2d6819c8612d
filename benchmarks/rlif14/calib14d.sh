#!/bin/bash
# session 14d calibration (declared_d.md): the seed-0 start for min_angle A, 20 HIL episodes
P=/work/main/.venv/bin/python
A=$1; D=runs/rlif14d_calib/a$A/seed0
mkdir -p $D
$P - "$A" "$D" <<'PY'
import sys, json; sys.path.insert(0, "benchmarks")
from pathlib import Path
import rlif_experiment as r
a, d = sys.argv[1], Path(sys.argv[2])
if not (d / "weak/manifest.json").exists():
    st = r._weaken_region(Path("runs/rlif_base_bundle"), d / "weak",
                          f"mode=flip,min_angle={a},steps=6000,jitter=0.5",
                          Path("runs/rlif14/base_obs.mcap"), 0)
    (d / "weaken.json").write_text(json.dumps(st))
print(json.loads((d / "weaken.json").read_text()))
PY
$P -m edgerl.apps hil --bundle $D/weak --episodes 20 --seed 0 --planner-latency-ms 100 --no-estop-check --link-probe 0 --json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print('A=$A start success', d['success'], 'steps', d['steps'])"
