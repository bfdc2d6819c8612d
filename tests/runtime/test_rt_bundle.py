"""load_bundle and the inference backends on real ONNX files."""

from __future__ import annotations

import json
import logging

import numpy as np
import onnxruntime as ort
import pytest

from edgerl.bundle_errors import OnnxShapeError
from edgerl.runtime.bundle import load_bundle
from edgerl.runtime.inference import (
    InferenceError,
    NumpyMLPBackend,
    choose_providers,
    load_mlp_npz,
    save_mlp_npz,
)
from edgerl.spec import BundleError, sha256_file


def test_loads_edit_bundle_with_ort_backend(mlp_bundle):
    spec, net = load_bundle(mlp_bundle, warmup=2)
    assert spec.method == "edit"
    assert net.name == "onnxruntime:CPUExecutionProvider"
    assert net.input.shape == (1, spec.edit_obs.dim) and net.output.shape == (1, 2)


def test_ort_backend_matches_plain_session_and_reuses_buffers(mlp_bundle):
    _, net = load_bundle(mlp_bundle, warmup=2)
    sess = ort.InferenceSession(str(mlp_bundle / "policy.onnx"),
                                providers=["CPUExecutionProvider"])
    x = np.random.default_rng(3).standard_normal(net.input.shape).astype(np.float32)
    out_buf = net.output
    for scale in (1.0, -2.0):
        net.input[...] = x * scale
        y = net.infer()
        assert y is out_buf  # filled in place
        expected = sess.run(None, {"obs": x * scale})[0]
        np.testing.assert_array_equal(y, expected)


def test_numpy_backend_matches_onnxruntime(mlp_bundle):
    _, onnx_net = load_bundle(mlp_bundle, warmup=1)
    _, np_net = load_bundle(mlp_bundle, backend="numpy")
    assert np_net.name == "numpy-mlp"
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = rng.standard_normal(onnx_net.input.shape).astype(np.float32)
        onnx_net.input[...] = x
        np_net.input[...] = x
        np.testing.assert_allclose(np_net.infer(), onnx_net.infer(), atol=2e-6, rtol=1e-5)


def test_numpy_mlp_normalises_input_and_relu(tmp_path):
    path = save_mlp_npz(tmp_path / "m.npz", [np.eye(2, dtype=np.float32) * 2.0,
                                             np.ones((1, 2), np.float32)],
                        [np.zeros(2, np.float32), np.array([0.5], np.float32)], "relu",
                        in_mean=[1.0, 1.0], in_std=[2.0, 4.0])
    net = NumpyMLPBackend(load_mlp_npz(path))
    net.input[0] = [3.0, -3.0]  # normalised: [1, -1] -> hidden [2, -2] -> relu [2, 0]
    assert net.infer()[0, 0] == pytest.approx(2.5)


def test_recurrent_state_is_carried_and_reset(make_bundle):
    spec, net = load_bundle(make_bundle("rnn", recurrent=True, hidden=(8,)), warmup=1)
    assert spec.recurrent.kind == "gru"
    net.input[...] = 0.5
    first = net.infer().copy()
    second = net.infer().copy()
    assert not np.allclose(first, second)  # the state changed the output
    net.reset_state()
    np.testing.assert_array_equal(net.infer(), first)


def test_tampered_model_is_rejected_naming_the_file(mlp_bundle):
    with open(mlp_bundle / "policy.onnx", "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(BundleError, match=r"policy\.onnx: sha256 mismatch"):
        load_bundle(mlp_bundle)


def test_newer_schema_is_rejected(mlp_bundle):
    path = mlp_bundle / "manifest.json"
    data = json.loads(path.read_text())
    data["schema_version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(BundleError, match="newer than this edgerl"):
        load_bundle(mlp_bundle)


def test_unlisted_model_file_is_rejected(mlp_bundle):
    path = mlp_bundle / "manifest.json"
    data = json.loads(path.read_text())
    del data["files"]["policy.onnx"]
    path.write_text(json.dumps(data))
    with pytest.raises(BundleError, match="not listed in manifest.files"):
        load_bundle(mlp_bundle)


def test_output_size_mismatch_is_reported(mlp_bundle):
    path = mlp_bundle / "manifest.json"
    data = json.loads(path.read_text())
    data["action"]["names"] = ["x", "y", "z"]
    for key in ("units", "low", "high", "max_rate"):
        data["action"][key] = data["action"][key][:1] * 3
    data["edit_obs"]["action_dim"] = 3
    path.write_text(json.dumps(data))
    with pytest.raises(OnnxShapeError, match="input 'obs' has 16 elements per row"):
        load_bundle(mlp_bundle)


def test_numpy_backend_without_weights_file(make_bundle):
    bundle = make_bundle("nonpz", npz=False)
    with pytest.raises(InferenceError, match="policy_mlp.npz: missing"):
        load_bundle(bundle, backend="numpy")


def test_planner_bundle_without_network(tmp_path, make_bundle):
    bundle = make_bundle("pl", method="planner")
    (bundle / "policy.onnx").unlink()
    (bundle / "policy_mlp.npz").unlink()
    (bundle / "parity.json").unlink()  # no network: nothing to prove (an unlisted one is refused)
    data = json.loads((bundle / "manifest.json").read_text())
    data["files"] = {}
    (bundle / "manifest.json").write_text(json.dumps(data))
    spec, net = load_bundle(bundle)
    assert spec.method == "planner" and net is None
    assert sha256_file(bundle / "manifest.json")


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
