"""load_bundle on real bundles: what it loads and what it refuses (the backends themselves:
test_rt_inference_ort.py, test_rt_inference_numpy_mlp.py; devices: test_rt_device.py)."""

from __future__ import annotations

import pytest

from edgerl.contract.bundle_errors import OnnxShapeError
from edgerl.contract.spec import BundleError, sha256_file
from edgerl.runtime.bundle import load_bundle
from tests.helpers.bundles import edit_manifest


def test_loads_edit_bundle_with_ort_backend(mlp_bundle):
    spec, net = load_bundle(mlp_bundle, warmup=2)
    assert spec.method == "edit"
    assert net.name == "onnxruntime:CPUExecutionProvider"
    assert net.input.shape == (1, spec.edit_obs.dim) and net.output.shape == (1, 2)


def test_tampered_model_is_rejected_naming_the_file(mlp_bundle):
    with open(mlp_bundle / "policy.onnx", "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(BundleError, match=r"policy\.onnx: sha256 mismatch"):
        load_bundle(mlp_bundle)


def test_newer_schema_is_rejected(mlp_bundle):
    edit_manifest(mlp_bundle, lambda doc: doc.update(schema_version=99))
    with pytest.raises(BundleError, match="newer than this edgerl"):
        load_bundle(mlp_bundle)


def test_unlisted_model_file_is_rejected(mlp_bundle):
    edit_manifest(mlp_bundle, lambda doc: doc["files"].pop("policy.onnx"))
    with pytest.raises(BundleError, match="not listed in manifest.files"):
        load_bundle(mlp_bundle)


def test_output_size_mismatch_is_reported(mlp_bundle):
    def three_actions(doc):
        doc["action"]["names"] = ["x", "y", "z"]
        for key in ("units", "low", "high", "max_rate"):
            doc["action"][key] = doc["action"][key][:1] * 3
        doc["edit_obs"]["action_dim"] = 3

    edit_manifest(mlp_bundle, three_actions)
    with pytest.raises(OnnxShapeError, match="input 'obs' has 16 elements per row"):
        load_bundle(mlp_bundle)


def test_planner_bundle_without_network(tmp_path, make_bundle):
    bundle = make_bundle("pl", method="planner")
    (bundle / "policy.onnx").unlink()
    (bundle / "policy_mlp.npz").unlink()
    (bundle / "parity.json").unlink()  # no network: nothing to prove (an unlisted one is refused)
    edit_manifest(bundle, lambda doc: doc.update(files={}))
    spec, net = load_bundle(bundle)
    assert spec.method == "planner" and net is None
    assert sha256_file(bundle / "manifest.json")
