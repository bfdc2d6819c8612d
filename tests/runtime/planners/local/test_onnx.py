"""OnnxChunkPlanner: a bundle's planner.onnx answers (H, A) chunks in the caller's clock."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.contract.planner import PlannerInfo
from edgerl.runtime.planners.local.onnx import OnnxChunkPlanner


def test_onnx_chunk_planner_reshapes_output(make_bundle):
    import onnxruntime as ort

    bundle = make_bundle("p", planner=True, horizon=6)
    info = PlannerInfo(horizon=6, action_dim=2, dt_s=0.01, period_s=0.05, expected_latency_s=0)
    planner = OnnxChunkPlanner(bundle / "planner.onnx", info)
    obs = np.array([0.1, -0.2, 0.3, 0.4], np.float32)
    chunk = planner.plan(obs, "", 2.0)
    sess = ort.InferenceSession(str(bundle / "planner.onnx"), providers=["CPUExecutionProvider"])
    expected = sess.run(None, {"obs": obs[None]})[0].reshape(6, 2)
    np.testing.assert_allclose(chunk.actions, expected, rtol=1e-6)
    assert chunk.t0 == 2.0 and chunk.obs_time == 2.0 and chunk.dt == 0.01
    with pytest.raises(ValueError, match="expected horizon\\*action_dim = 10"):
        OnnxChunkPlanner(bundle / "planner.onnx", PlannerInfo(5, 2, 0.01, 0.05, 0.0))
