"""The exporter writes bundles the runtime's verify_bundle accepts: every file hashed,
parity.json listed and ok, bounds checked before writing, optional signature."""

from __future__ import annotations

import json

import pytest

from edgerl.contract import ActionSpec
from edgerl.contract.bundle_errors import BundleSignatureError, ManifestValueError
from edgerl.export.bundle import export_bundle
from edgerl.runtime.bundle_check import LOADER_FILES, verify_bundle
from tests.helpers.export_models import NormMLP, make_spec


def test_every_written_file_is_listed_and_verifies(tmp_path, parity_obs):
    report = export_bundle(NormMLP(), make_spec(), tmp_path / "b", parity_obs)
    written = {p.name for p in (tmp_path / "b").iterdir()} - {"manifest.json"}
    assert written == set(report.spec.files)
    assert written & set(LOADER_FILES) == written - {"policy.h"}
    spec = verify_bundle(tmp_path / "b", check_onnx=True)
    assert spec.files["parity.json"] == report.spec.files["parity.json"]
    assert json.loads((tmp_path / "b" / "parity.json").read_text())["ok"] is True


def test_export_refuses_a_spec_the_runtime_would_refuse(tmp_path, parity_obs):
    """Failed on main: a negative max_rate was exported (and then silently meant
    'unlimited' on the robot)."""
    spec = make_spec(action=ActionSpec(names=["f0", "f1"], units=["N", "N"], low=[-1.0, -1.0],
                                       high=[1.0, 1.0], max_rate=[-5.0, 1.0]))
    with pytest.raises(ManifestValueError, match=r"action\.max_rate\[0\]: -5\.0"):
        export_bundle(NormMLP(), spec, tmp_path / "b", parity_obs)
    assert not (tmp_path / "b" / "manifest.json").exists()


def test_export_signs_with_a_key(tmp_path, parity_obs):
    pytest.importorskip("cryptography", reason="signing needs the 'sign' extra")
    from edgerl.runtime.bundle_sign import generate_keypair

    priv, pub = generate_keypair(tmp_path / "keys")
    out = tmp_path / "signed"
    export_bundle(NormMLP(), make_spec(), out, parity_obs, sign_key=priv)
    assert verify_bundle(out, pubkey=pub).method == "edit"
    # a re-export without a key removes the stale signature, which then fails to verify
    export_bundle(NormMLP(seed=1), make_spec(), out, parity_obs)
    assert not (out / "manifest.sig").exists()
    with pytest.raises(BundleSignatureError, match="manifest.sig: missing"):
        verify_bundle(out, pubkey=pub)
