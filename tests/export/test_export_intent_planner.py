"""export_bundle of a planner with an intent head: ``planner.onnx`` gets a second output
``intent`` (parity-checked like the chunk), the manifest records it, the runtime's ONNX planner
returns chunks that carry it, and ``edgerl inspect`` shows it."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
import torch

from edgerl.contract.spec import load_bundle_manifest
from edgerl.export.bundle import export_bundle
from edgerl.export.onnx_export import ExportError
from edgerl.policies.bc_planner import BCChunkPlanner
from edgerl.runtime.bundle import load_bundle
from edgerl.runtime.planners.local.onnx import onnx_planner
from tests.helpers.export_models import ACT_DIM, OBS_DIM, NormMLP, make_spec

H, INTENT = 8, 2


def _planner(intent_dim: int = INTENT) -> BCChunkPlanner:
    torch.manual_seed(3)
    return BCChunkPlanner(OBS_DIM, ACT_DIM, H, [-1.0] * ACT_DIM, [1.0] * ACT_DIM,
                          hidden_dims=(16, 16), intent_dim=intent_dim, fast_indices=[0, 2])


def _inputs(dim: int) -> np.ndarray:
    return (np.random.default_rng(0).standard_normal((1000, dim)) * 2.0).astype(np.float32)


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    spec = make_spec(intent_dim=INTENT)
    planner = _planner()
    out = tmp_path_factory.mktemp("intent_bundle")
    report = export_bundle(NormMLP(in_dim=spec.edit_obs.dim), spec, out,
                           _inputs(spec.edit_obs.dim), planner=planner)
    return out, planner, report


def test_planner_onnx_has_the_intent_output_with_parity(bundle):
    out, planner, report = bundle
    p = report.parity["planner_onnx"]
    assert [o.name for o in p.outputs] == ["chunk", "intent"]
    assert p.ok and p.max_abs_err <= 1e-5
    sess = ort.InferenceSession(str(out / "planner.onnx"), providers=["CPUExecutionProvider"])
    assert [o.name for o in sess.get_outputs()] == ["chunk", "intent"]
    x = _inputs(OBS_DIM)[:5]
    with torch.no_grad():
        ref_chunk, ref_intent = planner.forward_intent(torch.from_numpy(x))
    for i in range(5):
        chunk, intent = sess.run(None, {"obs": x[i:i + 1]})
        assert intent.shape == (1, INTENT)
        np.testing.assert_allclose(intent[0], ref_intent[i].numpy(), atol=1e-5)
        np.testing.assert_allclose(chunk[0], ref_chunk[i].numpy(), atol=1e-5)


def test_manifest_records_the_intent(bundle):
    out, _, _ = bundle
    spec = load_bundle_manifest(out)
    extra = spec.extra["export"]["planner"]
    assert extra["outputs"] == ["chunk", "intent"] and extra["intent_dim"] == INTENT
    assert spec.edit_obs.intent_dim == INTENT
    assert json.loads((out / "manifest.json").read_text())["edit_obs"]["intent_dim"] == INTENT


def test_the_runtime_planner_returns_chunks_with_the_intent(bundle):
    out, planner, _ = bundle
    spec, net = load_bundle(out, warmup=1)  # the bundle check passes
    assert net.input.shape[-1] == spec.edit_obs.dim
    local = onnx_planner(str(out / "planner.onnx"), H, ACT_DIM, 0.02, 0.06)
    assert local.info.intent_dim == INTENT
    obs = _inputs(OBS_DIM)[7]
    chunk = local.plan(obs, "", 2.5)
    with torch.no_grad():
        ref_chunk, ref_intent = planner.forward_intent(torch.from_numpy(obs[None]))
    assert chunk.intent.shape == (INTENT,) and chunk.intent.dtype == np.float32
    np.testing.assert_allclose(chunk.intent, ref_intent[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(chunk.actions, ref_chunk[0].numpy(), atol=1e-5)


def test_inspect_shows_the_intent(bundle, capsys):
    from edgerl.apps.cli import main

    out, _, _ = bundle
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "intent 2" in text and "planner.onnx" in text and "intent (1, 2)" in text


def test_intent_size_must_match_the_manifest(tmp_path):
    spec = make_spec()  # edit_obs.intent_dim 0
    with pytest.raises(ExportError, match="intent of 2 values; the manifest's "
                                          "edit_obs.intent_dim is 0"):
        export_bundle(NormMLP(in_dim=spec.edit_obs.dim), spec, tmp_path,
                      _inputs(spec.edit_obs.dim), planner=_planner())
    assert not (tmp_path / "manifest.json").exists()
