#!/usr/bin/env bash
# CI job: the edge install on its own terms (JetPack 6 / ROS 2 Humble ship Python 3.10).
#  1. a Python 3.10 venv (.venv-rt310) from `.[runtime]` + constraints-runtime.txt (no torch,
#     no MuJoCo; checked), plus pip rclpy (the `ros` extra's cp310 wheels, pinned as in
#     constraints.txt) and edgerl_ros for the ROS tests that need no torch;
#  2. the runtime, firmware-link and contract tests in it (numpy 1.21.6, onnxruntime 1.23.2),
#     and the torch-free ROS tests: the robot:=serial graph against the host firmware on a
#     pty (no torch in any node), ros2_control interop, the nodes' device parameter;
#  3. every runtime pin downloaded as a manylinux aarch64 cp310 wheel (the Jetson's platform),
#     and the downloaded set must be exactly the pinned set.
# PY310 names the interpreter (default: python3.10 on PATH, else pyenv's 3.10.13).
set -euo pipefail
cd "$(dirname "$0")/.."
t_start=$SECONDS
LOCK=constraints-runtime.txt
VENV=${VENV_RT310:-.venv-rt310}
is_py310() { "$1" -c 'import sys; assert sys.version_info[:2] == (3, 10)' >/dev/null 2>&1; }
if [ -z "${PY310:-}" ]; then  # a pyenv shim on PATH may exist and still not run
    for cand in python3.10 "${PYENV_ROOT:-$HOME/.pyenv}/versions/3.10.13/bin/python3.10"; do
        if is_py310 "$cand"; then PY310=$cand; break; fi
    done
fi
if [ -z "${PY310:-}" ] || ! is_py310 "$PY310"; then
    echo "ci-py310: no working Python 3.10 interpreter (set PY310=/path/to/python3.10)" >&2
    exit 1
fi
PIP=(--quiet --disable-pip-version-check)

# 1. the venv (re-installed only when the locks, pyproject.toml or this script change)
stamp="$VENV/.edgerl-rt310"
if [ ! -f "$stamp" ] || [ "$LOCK" -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ] \
        || [ constraints.txt -nt "$stamp" ] || [ "$0" -nt "$stamp" ]; then
    test -x "$VENV/bin/python" || "$PY310" -m venv "$VENV"
    # the ROS wheels' pins come from the workstation lock, minus what the runtime lock pins
    ros_pins=$(mktemp)
    sed 's/==.*//' "$LOCK" | grep -v '^#' | tr 'A-Z_.' 'a-z--' > "$ros_pins.names"
    while IFS= read -r line; do
        name=$(echo "${line%%==*}" | tr 'A-Z_.' 'a-z--')
        grep -qx "$name" "$ros_pins.names" || echo "$line"
    done < constraints.txt > "$ros_pins"
    "$VENV/bin/python" -m pip install "${PIP[@]}" -c "$LOCK" -c "$ros_pins" \
        -e ".[runtime,ros,sign]" onnx pytest pytest-timeout hypothesis
    "$VENV/bin/python" -m pip install "${PIP[@]}" --no-deps --no-build-isolation \
        -e ros2_ws/src/edgerl_ros
    rm -f "$ros_pins" "$ros_pins.names"
    touch "$stamp"
fi
"$VENV/bin/python" - "$LOCK" <<'EOF'
import importlib.metadata as md
import importlib.util
import sys

assert sys.version_info[:2] == (3, 10), sys.version
heavy = [m for m in ("torch", "mujoco", "matplotlib") if importlib.util.find_spec(m)]
assert not heavy, f"the runtime venv must not contain {heavy}"
pins = dict(line.split("==") for line in open(sys.argv[1])
            if "==" in line and not line.startswith("#"))
wrong = {n: (v.strip(), md.version(n)) for n, v in pins.items() if md.version(n) != v.strip()}
assert not wrong, f"installed versions differ from the lock (pin, installed): {wrong}"
print(f"ci-py310: Python {sys.version.split()[0]}, {len(pins)} pins installed as locked, "
      "no torch/mujoco")
EOF

# 2. the runtime subset: everything under tests/ that needs only the [runtime] install
"$VENV/bin/python" -m pytest -q -p no:cacheprovider \
    tests/runtime tests/firmware tests/contract tests/hil tests/test_architecture.py \
    tests/bench/test_count_ratio.py tests/bench/test_child_json.py tests/bench/loop \
    tests/bench/planner tests/apps/soak tests/apps/demo \
    --ignore tests/contract/test_edit_obs.py --ignore tests/apps/demo/test_demo.py \
    --ignore tests/hil/test_fw_hil.py --ignore tests/firmware/test_fw_bench_serial.py \
    --ignore tests/firmware/test_fw_qemu.py --ignore tests/firmware/test_fw_edit.py \
    --ignore tests/runtime/gate/test_rt_gate.py --ignore tests/hil/test_hil_gate.py \
    --ignore tests/hil/test_fw_hil_operator.py \
    --deselect tests/runtime/test_rt_metrics.py::test_json_and_png_export \
    --deselect tests/apps/soak/test_soak.py::test_short_soak_has_no_unsafe_command_and_no_crash \
    tests/ros2_ws/test_deploy_serial.py tests/ros2_ws/test_ros2_control_bridge.py \
    tests/ros2_ws/test_device_param.py tests/apps/cli/test_cli.py \
    tests/apps/cli/test_readme_verbs.py

# 3. the lock's runtime section as manylinux aarch64 cp310 wheels (glibc up to 2.35)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed -n '/^# --- test tools/q;/==/p' "$LOCK" > "$tmp/runtime.txt"
platforms=(--platform manylinux2014_aarch64)
for minor in $(seq 17 35); do platforms+=(--platform "manylinux_2_${minor}_aarch64"); done
"$VENV/bin/python" -m pip download "${PIP[@]}" --dest "$tmp/wheels" --only-binary=:all: \
    --python-version 3.10 --implementation cp --abi cp310 "${platforms[@]}" \
    -c "$LOCK" -r "$tmp/runtime.txt"
"$VENV/bin/python" - "$tmp/runtime.txt" "$tmp/wheels" <<'EOF'
import pathlib
import re
import sys

pins = {re.sub(r"[-_.]+", "_", line.split("==")[0]).lower()
        for line in open(sys.argv[1]) if "==" in line}
wheels = sorted(p.name for p in pathlib.Path(sys.argv[2]).iterdir())
got = {re.sub(r"[-_.]+", "_", w.split("-")[0]).lower() for w in wheels}
assert all(w.endswith(".whl") for w in wheels), wheels
assert got == pins, f"aarch64 download differs from the lock: missing {pins - got}, " \
                    f"unpinned {got - pins}"
arch = [w for w in wheels if "aarch64" in w]
print(f"ci-py310: {len(wheels)} aarch64 cp310 wheels for {len(pins)} runtime pins "
      f"({len(arch)} binary: {', '.join(arch)})")
EOF
echo "ci-py310: done in $((SECONDS - t_start)) s"
