#!/usr/bin/env bash
# GPU device check for the runtime's inference devices, for a machine with an
# NVIDIA GPU and NO network: it uses only this repo and what the machine already has
# installed (python3, numpy, onnxruntime-gpu, tensorrt). Whatever is missing is reported
# and that part skipped; it never fails the machine.
#
#   bash tools/gpu_device_check.sh            # results under $OUT (default ./out/gpu)
#
# What it checks, on tools/gpu_check_bundle (MLP 34 -> 64 -> 64 -> 4):
#  1. nvidia-smi, python, numpy / onnxruntime / tensorrt versions, onnxruntime's providers;
#  2. load_bundle(device=cpu|cuda|tensorrt|auto): which provider the session really runs on,
#     load time (the TensorRT EP builds its engine the first time, the second load must hit
#     the engine cache in $OUT/trt_cache), infer() p50/p99 over 2000 calls, max |diff| to CPU;
#  3. with the tensorrt package: build policy.engine from policy.onnx with the TensorRT
#     builder, list it in the manifest, and check load_bundle(device=tensorrt) runs it
#     directly (backend tensorrt:policy.engine) with outputs close to CPU.
# Output: $OUT/gpu_device_check.json, $OUT/gpu_device_check.log.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
OUT=${OUT:-$REPO/out/gpu}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
LOG="$OUT/gpu_device_check.log"
exec > >(tee "$LOG") 2>&1
echo "== gpu_device_check $(date -u +%FT%TZ) on $(hostname)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader || echo "nvidia-smi: not found"

PY=""
for cand in "${PYTHON:-}" python3 python; do
    if [ -n "$cand" ] && command -v "$cand" >/dev/null 2>&1; then PY=$(command -v "$cand"); break; fi
done
if [ -z "$PY" ]; then echo "SKIP: no python on this machine"; exit 0; fi
echo "python: $PY ($("$PY" -V 2>&1))"

# edgerl importable without installing anything (no network, maybe no setuptools): a
# package tree of symlinks mapping each layer folder the runtime needs to edgerl.<folder>, as
# setup.py does (edgerl itself is a namespace package: no __init__.py).
PKG=$(mktemp -d)
trap 'rm -rf "$PKG"' EXIT
mkdir -p "$PKG/edgerl"
for layer in contract runtime; do ln -s "$REPO/$layer" "$PKG/edgerl/$layer"; done
export PYTHONPATH="$PKG${PYTHONPATH:+:$PYTHONPATH}"
export EDGERL_TRT_CACHE="$OUT/trt_cache"
cd "$PKG"  # not the repo root: its folders are not packages by these names

"$PY" - "$REPO/tools/gpu_check_bundle" "$OUT" <<'EOF'
import json
import logging
import shutil
import sys
import time
from pathlib import Path

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
bundle, out = Path(sys.argv[1]), Path(sys.argv[2])
res = {"bundle": str(bundle)}


def report(key, value):
    res[key] = value
    print(f"{key}: {value}", flush=True)


def save():
    (out / "gpu_device_check.json").write_text(json.dumps(res, indent=2, default=str) + "\n")


for mod in ("numpy", "onnxruntime", "tensorrt"):
    try:
        m = __import__(mod)
        report(f"{mod}_version", getattr(m, "__version__", "?"))
    except Exception as exc:  # report and go on
        report(f"{mod}_version", f"unavailable: {exc}")
try:
    import numpy as np
    import onnxruntime as ort

    from edgerl.runtime.bundle import load_bundle
    from edgerl.runtime.inference import TensorRTOptions
except Exception as exc:
    report("skipped", f"numpy/onnxruntime/edgerl not importable: {exc}")
    save()
    sys.exit(0)
report("available_providers", ort.get_available_providers())
import importlib.metadata as md

dists = {}
for name in ("onnxruntime", "onnxruntime-gpu"):
    try:
        dists[name] = md.version(name)
    except md.PackageNotFoundError:
        pass
report("onnxruntime_distributions", dists)


def _time_infer(net, x, n=2000):
    net.input[...] = x
    for _ in range(50):
        net.infer()
    ts = np.empty(n)
    for i in range(n):
        t0 = time.perf_counter()
        net.infer()
        ts[i] = time.perf_counter() - t0
    return float(np.percentile(ts, 50) * 1e6), float(np.percentile(ts, 99) * 1e6)


rng = np.random.default_rng(0)
_, cpu = load_bundle(bundle, device="cpu", warmup=5)
xs = rng.standard_normal((64,) + cpu.input.shape).astype(np.float32)


def outputs(net):
    ys = []
    for x in xs:
        net.input[...] = x
        ys.append(net.infer().copy())
    return np.stack(ys)


ref = outputs(cpu)
trt_opts = TensorRTOptions(fp16=False, workspace_mb=1024)
devices = {}
for device in ("cpu", "cuda", "tensorrt", "auto"):
    row = {}
    try:
        for attempt in ("first_load_s", "second_load_s"):
            t0 = time.perf_counter()
            _, net = load_bundle(bundle, device=device, trt=trt_opts, warmup=5)
            row[attempt] = round(time.perf_counter() - t0, 3)
        row["backend"] = net.name
        row["requested"] = getattr(net, "requested", None)
        row["max_abs_diff_vs_cpu"] = float(np.max(np.abs(outputs(net) - ref)))
        row["infer_p50_us"], row["infer_p99_us"] = _time_infer(net, xs[0])
    except Exception as exc:  # InferenceError or a provider failure: report, go on
        row["error"] = f"{type(exc).__name__}: {exc}"
    devices[device] = row
    print(f"device {device}: {row}", flush=True)
res["devices"] = devices
cache = Path(out / "trt_cache")
res["trt_cache_files"] = sorted(p.name for p in cache.glob("*")) if cache.is_dir() else []
print("trt cache:", res["trt_cache_files"])
save()

# 3. policy.engine built here with the TensorRT builder, loaded directly
try:
    import tensorrt as trt
except Exception as exc:
    report("engine_check", f"skipped: tensorrt not importable ({exc})")
    save()
    sys.exit(0)
try:
    from edgerl.contract.spec import PolicySpec, sha256_file

    eb = out / "engine_bundle"
    shutil.rmtree(eb, ignore_errors=True)
    shutil.copytree(bundle, eb)
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse((eb / "policy.onnx").read_bytes()):
        raise RuntimeError("; ".join(str(parser.get_error(i)) for i in range(parser.num_errors)))
    config = builder.create_builder_config()
    t0 = time.perf_counter()
    blob = builder.build_serialized_network(network, config)
    if blob is None:
        raise RuntimeError("build_serialized_network returned None")
    (eb / "policy.engine").write_bytes(bytes(blob))
    report("engine_build_s", round(time.perf_counter() - t0, 2))
    spec = PolicySpec.load(eb)
    spec.files["policy.engine"] = sha256_file(eb / "policy.engine")
    spec.save(eb)
    _, net = load_bundle(eb, device="tensorrt", warmup=5)
    row = {"backend": net.name, "max_abs_diff_vs_cpu": float(np.max(np.abs(outputs(net) - ref)))}
    row["infer_p50_us"], row["infer_p99_us"] = _time_infer(net, xs[0])
    report("engine_check", row)
    _, net_auto = load_bundle(eb, device="auto", warmup=5)
    report("engine_auto_backend", net_auto.name)
    _, net_cpu = load_bundle(eb, device="cpu", warmup=5)
    report("engine_cpu_backend", net_cpu.name)
except Exception as exc:
    report("engine_check", f"failed: {type(exc).__name__}: {exc}")
save()
EOF
echo "== results: $OUT/gpu_device_check.json"
