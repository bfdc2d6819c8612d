"""``edgerl.runtime.inference.numpy_mlp``: the numpy MLP backend and its weight file."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.runtime.bundle import load_bundle
from edgerl.runtime.inference import (
    InferenceError,
    NumpyMLPBackend,
    load_mlp_npz,
    save_mlp_npz,
)


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


def test_numpy_backend_without_weights_file(make_bundle):
    bundle = make_bundle("nonpz", npz=False)
    with pytest.raises(InferenceError, match="policy_mlp.npz: missing"):
        load_bundle(bundle, backend="numpy")
