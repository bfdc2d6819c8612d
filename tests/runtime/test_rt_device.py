"""Device selection: auto -> TensorRT EP -> CUDA EP -> CPU, TensorRT EP options, and the same
through ``load_bundle`` beside an installed ``onnxruntime-gpu`` distribution.

No GPU here: the stub test puts a stub ``onnxruntime-gpu`` distribution
(``ort_gpu_stub.py``) on ``PYTHONPATH``: the real CPU onnxruntime with the provider list a
GPU build reports, recording what each ``InferenceSession`` was asked for; the real
onnxruntime then runs the model on CPU (and our code says so).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from edgerl.runtime.inference import (
    InferenceError,
    TensorRTOptions,
    choose_providers,
    default_trt_cache_dir,
)
from tests.helpers.ort_gpu_stub import write_ort_gpu_stub

CPU, CUDA, TRT = "CPUExecutionProvider", "CUDAExecutionProvider", "TensorrtExecutionProvider"
GPU_BUILD = [TRT, CUDA, CPU]


def test_trt_options_are_the_onnxruntime_option_strings(tmp_path):
    opts = TensorRTOptions(cache_dir=tmp_path / "c", fp16=True, workspace_mb=256)
    assert opts.provider_options() == {
        "trt_fp16_enable": "True", "trt_max_workspace_size": str(256 * 1024 * 1024),
        "trt_engine_cache_enable": "True", "trt_engine_cache_path": str(tmp_path / "c"),
        "trt_timing_cache_enable": "True", "trt_timing_cache_path": str(tmp_path / "c")}
    off = TensorRTOptions(cache_dir="").provider_options()
    assert off == {"trt_fp16_enable": "False", "trt_max_workspace_size": str(1 << 30)}
    with pytest.raises(InferenceError, match="workspace_mb must be in"):
        TensorRTOptions(workspace_mb=0)


def test_default_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("EDGERL_TRT_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_trt_cache_dir() == tmp_path / "edgerl" / "tensorrt"
    assert TensorRTOptions().provider_options()["trt_engine_cache_path"] == \
        str(tmp_path / "edgerl" / "tensorrt")
    monkeypatch.setenv("EDGERL_TRT_CACHE", str(tmp_path / "mine"))
    assert default_trt_cache_dir() == tmp_path / "mine"


def test_auto_prefers_tensorrt_then_cuda_then_cpu(tmp_path):
    trt = TensorRTOptions(cache_dir=tmp_path, fp16=True)
    assert choose_providers("auto", GPU_BUILD, trt) == [(TRT, trt.provider_options()), CUDA, CPU]
    assert choose_providers("auto", [CUDA, CPU], trt) == [CUDA, CPU]
    assert choose_providers("auto", [CPU], trt) == [CPU]
    assert choose_providers("cpu", GPU_BUILD) == [CPU]
    assert choose_providers("cuda", GPU_BUILD) == [CUDA, CPU]
    assert choose_providers("tensorrt", [TRT, CPU], trt) == [(TRT, trt.provider_options()), CPU]
    with pytest.raises(InferenceError, match="needs TensorrtExecutionProvider.*onnxruntime-gpu"):
        choose_providers("tensorrt", [CUDA, CPU])


PROBE = '''
import importlib.metadata as md, json, logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
import onnxruntime
from edgerl.runtime.bundle import load_bundle
from edgerl.runtime.inference import TensorRTOptions
trt = TensorRTOptions(cache_dir=sys.argv[2], fp16=True, workspace_mb=512)
spec, net = load_bundle(sys.argv[1], device="auto", trt=trt, warmup=1)
net.input[...] = 0.5
print(json.dumps({"stub": getattr(onnxruntime, "STUB", False),
                  "dist": md.version("onnxruntime-gpu"), "asked": onnxruntime.ASKED,
                  "requested": net.requested, "provider": net.provider,
                  "action": net.infer().tolist()}))
'''


def test_auto_picks_tensorrt_with_cache_options_beside_onnxruntime_gpu(mlp_bundle, tmp_path):
    site, cache = tmp_path / "site", tmp_path / "trt-cache"
    write_ort_gpu_stub(site)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)}
    res = subprocess.run([sys.executable, "-c", PROBE, str(mlp_bundle), str(cache)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    want_opts = {"trt_fp16_enable": "True", "trt_max_workspace_size": str(512 << 20),
                 "trt_engine_cache_enable": "True", "trt_engine_cache_path": str(cache),
                 "trt_timing_cache_enable": "True", "trt_timing_cache_path": str(cache)}
    assert out["stub"] is True and out["dist"] == "1.23.2"
    assert out["requested"] == [[TRT, want_opts], CUDA, CPU]
    # what onnxruntime.InferenceSession itself received: names + per-provider options
    assert out["asked"] == [{"providers": [TRT, CUDA, CPU],
                             "provider_options": [want_opts, {}, {}]}]
    assert cache.is_dir()  # created for TensorRT's engine cache
    # no real TensorRT here: onnxruntime runs on CPU, and the runtime says so
    assert out["provider"] == CPU
    assert "asked onnxruntime for TensorrtExecutionProvider but the session runs on " \
           "CPUExecutionProvider" in res.stderr
    assert len(out["action"][0]) == 2


def _add_engine(bundle, data: bytes, listed: bool = True):
    from edgerl.contract.spec import PolicySpec, sha256_file

    (bundle / "policy.engine").write_bytes(data)
    spec = PolicySpec.load(bundle)
    if listed:
        spec.files["policy.engine"] = sha256_file(bundle / "policy.engine")
    spec.save(bundle)
    return spec


def test_policy_engine_falls_back_to_onnxruntime_with_the_reason(mlp_bundle, caplog):
    import importlib.util
    import logging

    from edgerl.runtime.bundle import load_bundle
    from edgerl.runtime.trt_engine import engine_status

    if importlib.util.find_spec("tensorrt") is not None:
        pytest.skip("tensorrt is installed here: the GPU check covers the engine path")
    spec = _add_engine(mlp_bundle, b"not an engine built here")
    assert engine_status(spec, mlp_bundle)[0] is False
    with caplog.at_level(logging.INFO, logger="edgerl.runtime.bundle"):
        _, net = load_bundle(mlp_bundle, device="auto", warmup=1)
    assert net.name == "onnxruntime:CPUExecutionProvider"
    assert "policy.engine not used (the tensorrt Python package is not importable" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="edgerl.runtime.bundle"):
        load_bundle(mlp_bundle, device="cpu", warmup=1)  # cpu: the engine is not considered
    assert "policy.engine" not in caplog.text


def test_engine_status_reasons(mlp_bundle, make_bundle):
    from edgerl.contract.spec import PolicySpec
    from edgerl.runtime.trt_engine import engine_status

    spec = PolicySpec.load(mlp_bundle)
    assert engine_status(spec, mlp_bundle) == (False, "no policy.engine in the bundle")
    spec = _add_engine(mlp_bundle, b"x", listed=False)
    assert engine_status(spec, mlp_bundle) == (
        False, "policy.engine is not listed in manifest.files (hash unchecked)")
    rec = make_bundle("rec", recurrent=True)
    spec = _add_engine(rec, b"x")
    assert engine_status(spec, rec) == (
        False, "policy.engine: recurrent policies run through onnxruntime")


def test_device_choice(caplog):
    cpu = "CPUExecutionProvider"
    with caplog.at_level(logging.INFO, logger="edgerl.runtime.inference"):
        assert choose_providers("auto", [cpu]) == [cpu]
    assert "using CPU" in caplog.text
    assert choose_providers("auto", ["CUDAExecutionProvider", cpu])[0] == "CUDAExecutionProvider"
    assert choose_providers("auto", ["TensorrtExecutionProvider", "CUDAExecutionProvider",
                                     cpu])[0][0] == "TensorrtExecutionProvider"
    with pytest.raises(InferenceError, match="CUDAExecutionProvider, which this onnxruntime"):
        choose_providers("cuda", [cpu])
    with pytest.raises(InferenceError, match="unknown device 'gpu'"):
        choose_providers("gpu", [cpu])
