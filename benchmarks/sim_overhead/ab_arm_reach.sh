#!/bin/bash
# arm_reach before (80c204c) and after session 13's Python cut, alternating, same reference (issue #22)
cd "$(dirname "$0")/../.." || exit 1
# swaps the two task files in the working tree and puts them back: needs a clean tree
git diff --quiet -- sim/tasks/arm.py sim/mujoco/task_env.py || { echo "commit or stash first"; exit 1; }
m() { .venv/bin/python -c "
from edgerl.bench.sim.overhead import overhead_ratio
r=overhead_ratio('arm_reach'); print('$1', r['steps_per_s'], r['raw_physics_steps_per_s'], r['raw_from_rest_steps_per_s'], r['ratio'], r['ratio_from_rest'])"; }
for rep in 1 2 3; do
  git checkout -q 80c204c -- sim/tasks/arm.py sim/mujoco/task_env.py; m old
  git checkout -q HEAD -- sim/tasks/arm.py sim/mujoco/task_env.py; m new
done
git status --short
