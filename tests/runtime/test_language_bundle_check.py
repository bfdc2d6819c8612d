"""A language planner bundle (tiny real ONNX head, cached embeddings, no encoder) is a closed
set: its ``instructions.npz`` is read only when listed and hashed."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from edgerl.contract.bundle_errors import BundleHashError, UnlistedFileError
from edgerl.contract.spec import TensorSpec, sha256_file
from edgerl.runtime.planners.local.language import OnnxLanguagePlanner
from tests.helpers.bundles import edit_manifest, write_parity
from tests.helpers.specs import make_spec

OBS, EMB, H, A = 4, 8, 5, 2


def _head(seed: int = 0) -> tuple[bytes, np.ndarray]:
    """``chunk = reshape([obs, embedding] @ W^T, (N, H, A))`` as ONNX, and W."""
    w = np.random.default_rng(seed).standard_normal((H * A, OBS + EMB)).astype(np.float32)
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Concat", ["obs", "embedding"], ["x"], axis=1),
             helper.make_node("Gemm", ["x", "w"], ["y"], transB=1),
             helper.make_node("Reshape", ["y", "shape"], ["chunk"])]
    graph = helper.make_graph(
        nodes, "head", [helper.make_tensor_value_info("obs", f, ["N", OBS]),
                        helper.make_tensor_value_info("embedding", f, ["N", EMB])],
        [helper.make_tensor_value_info("chunk", f, ["N", H, A])],
        [numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(np.array([-1, H, A], np.int64), "shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model.SerializeToString(), w


@pytest.fixture
def lang_bundle(tmp_path):
    path = tmp_path / "lang"
    path.mkdir()
    head, w = _head()
    (path / "planner.onnx").write_bytes(head)
    emb = np.eye(2, EMB, dtype=np.float32) * 3.0  # "red" -> e0, "blue" -> e1
    np.savez(path / "instructions.npz", texts=np.asarray(["go to red", "go to blue"]),
             embeddings=emb)
    x = np.random.default_rng(1).standard_normal((16, OBS)).astype(np.float32)
    import onnxruntime as ort

    sess = ort.InferenceSession(head, providers=["CPUExecutionProvider"])
    got = sess.run(None, {"obs": x, "embedding": np.repeat(emb[:1], len(x), 0)})[0]
    ref = (np.concatenate([x, np.repeat(emb[:1], len(x), 0)], 1) @ w.T).reshape(-1, H, A)
    err = float(np.max(np.abs(got - ref)))
    write_parity(path, {"planner_onnx": {"max_abs_err": err, "ok": err <= 1e-5}})
    spec = make_spec(obs_dim=OBS, action_dim=A, method="language_planner", horizon=H,
                     residual_bound=0.0)
    spec.tensors = TensorSpec(inputs=["obs", "embedding"], outputs=["chunk"])
    spec.files = {n: sha256_file(path / n) for n in ("planner.onnx", "instructions.npz",
                                                     "parity.json")}
    spec.save(path)
    return path


def _swap_embeddings(path) -> None:
    with np.load(path / "instructions.npz") as data:
        texts, emb = data["texts"], data["embeddings"]
    np.savez(path / "instructions.npz", texts=texts, embeddings=emb[::-1].copy())


def test_cached_instructions_plan_differently(lang_bundle):
    planner = OnnxLanguagePlanner(lang_bundle)
    obs = np.zeros(OBS, np.float32)
    red = planner.plan(obs, "go to red", 0.0).actions
    blue = planner.plan(obs, "go to blue", 0.0).actions
    assert not np.allclose(red, blue)


def test_swapped_listed_embeddings_are_a_hash_error(lang_bundle):
    _swap_embeddings(lang_bundle)
    with pytest.raises(BundleHashError, match=r"instructions\.npz: sha256 mismatch"):
        OnnxLanguagePlanner(lang_bundle)


def test_swapped_unlisted_embeddings_are_refused(lang_bundle):
    """Defect: with ``instructions.npz`` unlisted, swapped embeddings loaded unhashed and
    "red" went to blue while ``inspect`` said OK (exit 0)."""
    reference = OnnxLanguagePlanner(lang_bundle)
    obs = np.zeros(OBS, np.float32)
    blue = reference.plan(obs, "go to blue", 0.0).actions
    bad = lang_bundle.parent / "unlisted"
    shutil.copytree(lang_bundle, bad)
    edit_manifest(bad, lambda doc: doc["files"].pop("instructions.npz"))
    _swap_embeddings(bad)
    with pytest.raises(UnlistedFileError, match=r"instructions\.npz: not listed"):
        OnnxLanguagePlanner(bad)
    # inspect: the one-line named error and exit 2, never OK (0) or a traceback
    proc = subprocess.run([sys.executable, "-m", "edgerl.apps", "inspect", str(bad)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "bundle refused (UnlistedFileError)" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert blue.shape == (H, A)
