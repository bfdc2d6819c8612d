"""verify_bundle / load_bundle refuse every known bundle defect with a named error.

Each test below is a defect found by probing the loader (the bundle loaded, or the error was
a raw traceback / an unnamed class); the defect is named in its docstring.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from edgerl.contract.bundle_errors import (
    BundleError,
    BundleHashError,
    BundlePathError,
    IntentMismatchError,
    ManifestEncodingError,
    ManifestNestingError,
    ManifestSyntaxError,
    ManifestValueError,
    OnnxModelError,
    OnnxShapeError,
    ParityError,
    UnlistedFileError,
)
from edgerl.contract.spec import sha256_file
from edgerl.runtime.bundle import load_bundle
from edgerl.runtime.bundle_check import verify_bundle
from edgerl.runtime.manifest_rules import ManifestLimits
from tests.helpers.bundles import mlp_onnx, random_mlp


def _edit(bundle: Path, change) -> None:
    """Apply ``change(doc)`` to the manifest and write it back (files' hashes untouched)."""
    path = bundle / "manifest.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def _list(bundle: Path, name: str, path: Path | None = None) -> None:
    """List ``name`` in manifest.files with the correct sha256 of ``path`` (default: the
    bundle's own file), i.e. the 'hash matches' case of the issue."""
    digest = sha256_file(path or bundle / name)
    _edit(bundle, lambda d: d["files"].__setitem__(name, digest))


def test_verified_bundle_loads(mlp_bundle):
    spec = verify_bundle(mlp_bundle, check_onnx=True)
    assert set(spec.files) == {"policy.onnx", "policy_mlp.npz", "parity.json"}


# --- paths -------------------------------------------------------------------------------------
def test_dotdot_file_entry_is_refused(mlp_bundle, tmp_path):
    """Defect: a ``files`` entry with ``../`` was read (its hash matched)."""
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"secret")
    _list(mlp_bundle, "../outside.bin", outside)
    with pytest.raises(BundlePathError, match=r"files\['\.\./outside\.bin'\]: '\.\.'"):
        load_bundle(mlp_bundle)


def test_absolute_file_entry_is_refused(mlp_bundle, tmp_path):
    """Defect: an absolute path in ``files`` was read (its hash matched)."""
    outside = tmp_path / "abs.bin"
    outside.write_bytes(b"x")
    _list(mlp_bundle, str(outside), outside)
    with pytest.raises(BundlePathError, match="absolute path"):
        verify_bundle(mlp_bundle)


def test_symlink_out_of_the_bundle_is_refused(mlp_bundle, tmp_path):
    """Defect: a listed symlink leading out of the bundle was followed."""
    outside = tmp_path / "elsewhere.bin"
    outside.write_bytes(b"y")
    os.symlink(outside, mlp_bundle / "link.bin")
    _list(mlp_bundle, "link.bin")
    with pytest.raises(BundlePathError, match="symlink leads out of the bundle"):
        verify_bundle(mlp_bundle)


def test_manifest_symlinked_out_of_the_bundle_is_refused(mlp_bundle, tmp_path):
    """Defect: ``manifest.json`` itself could be a symlink to a manifest outside the bundle
    (every listed file was checked inside while the manifest came from elsewhere)."""
    from edgerl.contract.spec import load_bundle_manifest

    outside = tmp_path / "elsewhere.json"
    (mlp_bundle / "manifest.json").rename(outside)
    os.symlink(outside, mlp_bundle / "manifest.json")
    for load in (verify_bundle, load_bundle_manifest, load_bundle):
        with pytest.raises(BundlePathError, match="manifest is a symlink that leads out"):
            load(mlp_bundle)


# --- closed set --------------------------------------------------------------------------------
def test_unlisted_planner_is_refused(make_bundle):
    """Defect: an unlisted ``planner.onnx`` was loaded without a hash check."""
    bundle = make_bundle("pl", planner=True, hidden=(8,))
    _edit(bundle, lambda d: d["files"].pop("planner.onnx"))
    with pytest.raises(UnlistedFileError, match=r"planner\.onnx: not listed in manifest.files"):
        load_bundle(bundle)


def test_unlisted_file_is_refused_even_when_not_a_network(mlp_bundle):
    """Defect: ``instructions.npz`` / ``tokenizer.json`` were read unlisted."""
    np.savez(mlp_bundle / "instructions.npz", texts=np.asarray(["a"]),
             embeddings=np.zeros((1, 4), np.float32))
    with pytest.raises(UnlistedFileError, match="instructions.npz"):
        verify_bundle(mlp_bundle)


def test_malformed_digest_is_a_hash_error(mlp_bundle):
    _edit(mlp_bundle, lambda d: d["files"].__setitem__("policy.onnx", "abc"))
    with pytest.raises(BundleHashError, match="not a sha256 hex digest"):
        verify_bundle(mlp_bundle)


# --- parity ------------------------------------------------------------------------------------
def test_failed_parity_is_refused(mlp_bundle):
    """Defect: a ``parity.json`` recording a failed check was accepted."""
    path = mlp_bundle / "parity.json"
    doc = json.loads(path.read_text())
    doc["ok"] = False
    doc["parity"]["policy_onnx"]["ok"] = False
    path.write_text(json.dumps(doc))
    _list(mlp_bundle, "parity.json")
    with pytest.raises(ParityError, match="parity failed.*failed checks: policy_onnx"):
        load_bundle(mlp_bundle)


def test_missing_parity_is_refused(mlp_bundle):
    """Defect: a bundle without ``parity.json`` loaded."""
    (mlp_bundle / "parity.json").unlink()
    _edit(mlp_bundle, lambda d: d["files"].pop("parity.json"))
    with pytest.raises(ParityError, match="must carry the exporter's passed parity report"):
        load_bundle(mlp_bundle)


# --- semantic bounds ---------------------------------------------------------------------------
@pytest.mark.parametrize("change, field", [
    (lambda d: d["action"].__setitem__("max_rate", [-1.0, -1.0]), r"action\.max_rate\[0\]"),
    (lambda d: d["action"].update(low=[-1000.0, -1000.0], high=[1000.0, 1000.0]),
     r"action\.low\[0\]"),
    (lambda d: d.__setitem__("control_hz", 1e9), "control_hz"),
    (lambda d: d["chunk"].__setitem__("dt_s", 1e-9), r"chunk\.dt_s"),
    (lambda d: d.__setitem__("residual_bound", -0.5), "residual_bound"),
    (lambda d: d["observation"].__setitem__("std", [1e-30] * 4), r"observation\.std\[0\]"),
])
def test_nonsense_values_are_refused_naming_the_field(mlp_bundle, change, field):
    """Defect: negative ``max_rate`` (rate limit off), +-1000 limits and ``control_hz`` 1e9
    passed."""
    _edit(mlp_bundle, change)
    if "control_hz" in field:  # keep timing consistent so only the bound can fail
        _edit(mlp_bundle, lambda d: d.pop("timing", None))
    with pytest.raises(ManifestValueError, match=field):
        load_bundle(mlp_bundle)


def test_horizon_beyond_the_bound_names_the_field(make_bundle):
    bundle = make_bundle("long", horizon=5000, chunk_dt=0.01, period_s=0.05)
    with pytest.raises(ManifestValueError, match=r"chunk\.horizon: 5000 is outside"):
        verify_bundle(bundle)
    assert verify_bundle(bundle, limits=ManifestLimits(max_horizon=10_000,
                                                       max_chunk_span_s=100.0))


def test_low_above_high_and_nan_are_named(mlp_bundle):
    _edit(mlp_bundle, lambda d: d["action"].update(low=[1.0, 1.0], high=[-1.0, -1.0]))
    with pytest.raises(BundleError, match=r"action\.low\[0\]: must be below"):
        verify_bundle(mlp_bundle)
    text = (mlp_bundle / "manifest.json").read_text().replace('"control_hz": 100.0',
                                                              '"control_hz": NaN')
    (mlp_bundle / "manifest.json").write_text(text)
    with pytest.raises(ManifestSyntaxError, match="NaN is not allowed"):
        verify_bundle(mlp_bundle)


# --- parse errors ------------------------------------------------------------------------------
def test_non_utf8_manifest_is_named(mlp_bundle):
    """Defect: a non-UTF-8 manifest gave a raw UnicodeDecodeError traceback."""
    (mlp_bundle / "manifest.json").write_bytes(b'{"task": "\xff\xfe"}')
    with pytest.raises(ManifestEncodingError, match="not UTF-8"):
        load_bundle(mlp_bundle)


def test_deeply_nested_manifest_is_named(mlp_bundle):
    """Defect: a deeply nested manifest gave a raw RecursionError traceback."""
    (mlp_bundle / "manifest.json").write_text('{"extra": ' + "[" * 100_000 + "]" * 100_000
                                              + "}")
    with pytest.raises(ManifestNestingError, match="nested"):
        load_bundle(mlp_bundle)
    deep: dict = {}
    node = deep
    for _ in range(40):  # within Python's recursion limit, beyond MAX_DEPTH
        node["k"] = {}
        node = node["k"]
    (mlp_bundle / "manifest.json").write_text(json.dumps({"extra": deep}))
    with pytest.raises(ManifestNestingError, match="at most 32"):
        verify_bundle(mlp_bundle)


def test_huge_integer_is_named(mlp_bundle):
    text = (mlp_bundle / "manifest.json").read_text()
    (mlp_bundle / "manifest.json").write_text(text.replace('"horizon": 10', '"horizon": '
                                                           + "9" * 5000, 1))
    with pytest.raises(ManifestSyntaxError, match="integer of 5000 digits"):
        verify_bundle(mlp_bundle)


# --- ONNX --------------------------------------------------------------------------------------
def test_garbage_onnx_is_named(mlp_bundle):
    """Defect: a garbage ONNX gave a raw onnxruntime traceback."""
    (mlp_bundle / "policy.onnx").write_bytes(b"\x08\x07garbage" * 50)
    _list(mlp_bundle, "policy.onnx")
    with pytest.raises(OnnxModelError, match="not a model onnxruntime can load"):
        verify_bundle(mlp_bundle, check_onnx=True)


def test_wrong_shape_planner_is_named(make_bundle):
    """Defect: a wrong-shape ONNX passed (here a planner whose chunk has the wrong size)."""
    bundle = make_bundle("plshape", planner=True, hidden=(8,))
    ws, bs = random_mlp([4, 8, 7])  # 7 outputs; the chunk needs 10 x 2 = 20
    (bundle / "planner.onnx").write_bytes(mlp_onnx(ws, bs, out_name="chunk"))
    _list(bundle, "planner.onnx")
    with pytest.raises(OnnxShapeError, match=r"planner\.onnx: output 'chunk' has 7 elements"):
        load_bundle(bundle)


def test_intent_planner_bundle_loads(make_bundle):
    bundle = make_bundle("intent", planner=True, hidden=(8,), intent_dim=2)
    spec, _ = load_bundle(bundle)
    assert spec.edit_obs.intent_dim == 2
    verify_bundle(bundle, check_onnx=True)


@pytest.mark.parametrize("manifest, planner, has", [
    (2, 3, "an 'intent' output of 3 elements per row"),
    (2, 0, "no intent output"),
    (0, 2, "an 'intent' output of 2 elements per row"),
])
def test_planner_intent_that_differs_from_edit_obs_is_refused(make_bundle, manifest, planner,
                                                               has):
    """The edit policy reads edit_obs.intent_dim values: a planner.onnx sending another size
    (or none, or one the policy does not read) is refused by name, at load and by inspect."""
    bundle = make_bundle(f"i{manifest}{planner}", planner=True, hidden=(8,),
                         intent_dim=manifest, planner_intent_dim=planner)
    match = f"planner.onnx: has {has}; the manifest's edit_obs.intent_dim is {manifest}"
    with pytest.raises(IntentMismatchError, match=match):
        load_bundle(bundle)
    with pytest.raises(IntentMismatchError, match=match):
        verify_bundle(bundle, check_onnx=True)


def test_wrong_output_width_is_named(mlp_bundle):
    ws, bs = random_mlp([16, 8, 3])  # edit observation 16 -> 3, but action has 2
    (mlp_bundle / "policy.onnx").write_bytes(mlp_onnx(ws, bs))
    _list(mlp_bundle, "policy.onnx")
    with pytest.raises(OnnxShapeError, match=r"output 'action' has shape \[1, 3\]"):
        verify_bundle(mlp_bundle, check_onnx=True)


def test_garbage_policy_through_load_bundle_is_named(mlp_bundle):
    """Defect: the runtime loader raised onnxruntime's own error for a garbage policy."""
    (mlp_bundle / "policy.onnx").write_bytes(b"\x00\x01not onnx" * 30)
    _list(mlp_bundle, "policy.onnx")
    with pytest.raises(OnnxModelError, match=r"policy\.onnx: not a model onnxruntime"):
        load_bundle(mlp_bundle, warmup=1)


def test_tensor_name_mismatch_is_a_shape_error(mlp_bundle):
    _edit(mlp_bundle, lambda d: d["tensors"].__setitem__("inputs", ["observation"]))
    with pytest.raises(OnnxShapeError, match="model has no input named 'observation'"):
        load_bundle(mlp_bundle, warmup=1)


def test_configured_key_without_cryptography_is_a_named_refusal(mlp_bundle, tmp_path,
                                                                monkeypatch):
    """A robot told to verify signatures but lacking the 'sign' extra refuses every bundle
    with a message saying what to install (never loads unverified)."""
    import sys

    from edgerl.contract.bundle_errors import BundleSignatureError

    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives", None)
    monkeypatch.setenv("EDGERL_BUNDLE_PUBKEY", str(tmp_path / "some.pub"))
    with pytest.raises(BundleSignatureError, match=r"pip install 'edgerl\[sign\]'"):
        load_bundle(mlp_bundle)
