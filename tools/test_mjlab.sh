#!/usr/bin/env bash
# `make test-mjlab`: mjlab (Isaac Lab's API on MuJoCo Warp) through edgerl, on the CPU.
#
# mjlab pins mujoco~=3.11 and its own rsl-rl-lib (5.4.2 for mjlab 1.6.0), so it gets its own
# venv (.venv-mjlab), never .venv. Steps: create/refresh the venv (stamp file), train a
# `nodelay` PPO expert on mjlab's cartpole, train `--method edit` with a BC chunk planner
# fit on that expert's demos and a 2-step planner delay, export a bundle, load it with
# edgerl.runtime.bundle.load_bundle and check the manifest carries mjlab's layout.
#
# Environment: MJLAB_VENV (.venv-mjlab), MJLAB_VERSION (1.6.0), MJLAB_TORCH (torch==2.13.0+cpu:
# a CPU wheel, so pip does not pull ~3 GB of CUDA libraries; on a GPU machine set e.g.
# MJLAB_TORCH=torch), MJLAB_PIP_ARGS (extra pip arguments, e.g.
# "--extra-index-url https://download.pytorch.org/whl/cpu" where the +cpu wheel is not local),
# MJLAB_OUT (runs/test-mjlab), MJLAB_PY (python3.11).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${MJLAB_VENV:-.venv-mjlab}
VERSION=${MJLAB_VERSION:-1.6.0}
TORCH=${MJLAB_TORCH:-torch==2.13.0+cpu}
PIP_ARGS=${MJLAB_PIP_ARGS:-}
OUT=${MJLAB_OUT:-runs/test-mjlab}
PY=${MJLAB_PY:-python3.11}
TASK=mjlab:Mjlab-Cartpole-Balance
STAMP=$VENV/.edgerl-mjlab-$VERSION
step() { printf '\n== test-mjlab: %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }

if [ ! -f "$STAMP" ] || [ setup.py -nt "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
    step "venv $VENV: $TORCH + mjlab==$VERSION"
    [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
    # shellcheck disable=SC2086
    "$VENV/bin/pip" install --quiet --disable-pip-version-check $PIP_ARGS "$TORCH"
    # shellcheck disable=SC2086
    "$VENV/bin/pip" install --quiet --disable-pip-version-check $PIP_ARGS \
        -c <(echo "$TORCH") "mjlab==$VERSION" onnxruntime gymnasium
    "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps -e .
    touch "$STAMP"
fi
"$VENV/bin/python" -c 'import mjlab, mujoco, rsl_rl, torch, importlib.metadata as m;
print("mjlab", m.version("mjlab"), "| mujoco", mujoco.__version__, "| rsl-rl-lib",
      m.version("rsl-rl-lib"), "| torch", torch.__version__)'

rm -rf "$OUT"
mkdir -p "$OUT"
EDGERL="$VENV/bin/edgerl"
quiet() { grep -v -E '^Module |^\[INFO\]|^[|+]' || true; }

step "train $TASK --method nodelay (the expert)"
"$EDGERL" train "$TASK" --method nodelay --num-envs 16 --iterations 3 --steps-per-env 16 \
    --out "$OUT/expert" --no-progress --json 2>&1 | quiet
step "train $TASK --method edit --planner bc --delay-steps 2"
"$EDGERL" train "$TASK" --method edit --planner bc --delay-steps 2 --num-envs 16 \
    --iterations 3 --steps-per-env 16 --task-arg "expert_run=$OUT/expert" \
    --out "$OUT/edit" --no-progress --json 2>&1 | quiet
step "export"
"$EDGERL" export "$OUT/edit" --out "$OUT/bundle" --recorded 200 --random 800 --num-envs 4 \
    2>&1 | quiet
step "load the bundle in the runtime"
"$VENV/bin/python" - "$OUT/bundle" <<'PYEOF'
import sys

import numpy as np

from edgerl.runtime.bundle import load_bundle

spec, net = load_bundle(sys.argv[1])
assert spec.task == "mjlab:Mjlab-Cartpole-Balance" and spec.method == "edit", spec.task
assert spec.observation.names == ["cart_pos", "pole_angle[0]", "pole_angle[1]", "cart_vel",
                                  "pole_vel"], spec.observation.names
assert spec.action.names == ["effort/slider"], spec.action.names
assert abs(spec.control_hz - 20.0) < 1e-9 and spec.latency.planner_delay_steps == 2
net.input[...] = 0.0
out = np.array(net.infer())
assert out.shape == (1, 1) and np.isfinite(out).all(), out
print(f"bundle {sys.argv[1]}: task={spec.task} method={spec.method} {spec.control_hz:.0f} Hz")
print(f"  observation: {spec.observation.names}")
print(f"  action: {spec.action.names} in [{spec.action.low}, {spec.action.high}]")
print(f"  backend {net.name}: edit obs ({spec.edit_obs.dim},) -> residual {out.ravel().tolist()}")
PYEOF
echo "test-mjlab: OK"
