#!/bin/bash
# arm_reach before (c89e354, numpy task logic) and after the numba kernel (HEAD), alternating,
# each against its own same-state raw physics (issue #22, session 14). Needs a clean tree.
cd "$(dirname "$0")/../.." || exit 1
git diff --quiet -- sim/ || { echo "commit or stash first"; exit 1; }
ENVS=${ENVS:-256}
m() { .venv/bin/python -c "
from edgerl.bench.sim.overhead import overhead_ratio
r=overhead_ratio('arm_reach', $ENVS); print('$1', $ENVS, r['steps_per_s'], r['raw_physics_steps_per_s'], r['ratio'], r['median_pair_ratio'])"; }
echo "variant envs steps_per_s raw_same_states ratio median_pair_ratio  ($(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg))"
for rep in 1 2 3; do
  git checkout -q c89e354 -- sim/tasks/arm.py sim/mujoco/task_env.py; m numpy
  git checkout -q HEAD -- sim/tasks/arm.py sim/mujoco/task_env.py; m numba
done
git status --short sim/
