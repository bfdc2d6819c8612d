"""``edgerl.runtime.inference.ort_backend``: the onnxruntime backend on real ONNX files."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from edgerl.runtime.bundle import load_bundle


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


def test_recurrent_state_is_carried_and_reset(make_bundle):
    spec, net = load_bundle(make_bundle("rnn", recurrent=True, hidden=(8,)), warmup=1)
    assert spec.recurrent.kind == "gru"
    net.input[...] = 0.5
    first = net.infer().copy()
    second = net.infer().copy()
    assert not np.allclose(first, second)  # the state changed the output
    net.reset_state()
    np.testing.assert_array_equal(net.infer(), first)
