"""One gate for bundles: every path that reads a bundle refuses what ``edgerl inspect`` and
``Deployment.from_bundle`` refuse.

With ``EDGERL_BUNDLE_PUBKEY`` set, a signed bundle plus an unlisted ``planner.onnx``, or a
manifest edited after signing, used to run through the HIL fast loop, the C-header export and
the ROS nodes (they read the manifest with hash checks only). Each entry point below is the
first thing its path calls on a bundle.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from edgerl.contract.bundle_errors import BundleSignatureError, UnlistedFileError
from tests.helpers.bundles import write_mlp_bundle

pytest.importorskip("cryptography")


def _deploy(bundle: Path) -> None:
    from edgerl.runtime.deployment import Deployment

    Deployment.from_bundle(bundle)


def _hil_host_loop(bundle: Path) -> None:
    import numpy as np

    from edgerl.hil.controllers import BundleController

    BundleController(bundle, 100.0, None, None, obs_dim=4, n_cmd=2, gain=np.zeros((1, 4)))


def _hil_fast_loop(bundle: Path) -> None:
    from edgerl.hil.fast_loop import FastLoopController

    FastLoopController(bundle, None, obs_dim=4)


def _edit_header(bundle: Path) -> None:
    from edgerl.export.edit_header import write_edit_header

    write_edit_header(bundle, bundle.parent / "headers")


def _inspect(bundle: Path) -> None:
    from edgerl.runtime.bundle_check import verify_bundle

    verify_bundle(bundle)


ENTRY_POINTS = {"deploy (Deployment.from_bundle)": _deploy, "edgerl inspect": _inspect,
                "HIL host loop": _hil_host_loop, "HIL fast loop": _hil_fast_loop,
                "C-header export of the edit step": _edit_header}


@pytest.fixture
def signed(tmp_path, monkeypatch) -> Path:
    """A signed edit bundle (with a planner), the robot configured to verify signatures."""
    from edgerl.runtime.bundle_sign import generate_keypair, sign_manifest

    priv, pub = generate_keypair(tmp_path / "keys")
    bundle = write_mlp_bundle(tmp_path / "bundle", hidden=(8,), planner=True)
    sign_manifest(bundle, priv)
    monkeypatch.setenv("EDGERL_BUNDLE_PUBKEY", str(pub))
    return bundle


def _unlisted_planner(bundle: Path) -> None:
    """Make ``bundle`` one without a planner (its planner.onnx kept beside it as p.onnx)."""
    doc = json.loads((bundle / "manifest.json").read_text())
    assert "planner.onnx" in doc["files"]
    # a signed bundle without a planner, then a planner.onnx dropped beside it
    shutil.copy(bundle / "planner.onnx", bundle.parent / "p.onnx")
    (bundle / "planner.onnx").unlink()
    doc["files"].pop("planner.onnx")
    (bundle / "manifest.json").write_text(json.dumps(doc))


def test_the_signed_bundle_passes_the_gate(signed):
    """The control: the same signed bundle, untouched, loads (what the refusals below refuse
    is the change, not the bundle)."""
    from edgerl.runtime.bundle_check import verify_bundle

    assert verify_bundle(signed).method == "edit"
    _deploy(signed)
    _edit_header(signed)
    assert (signed.parent / "headers" / "edit_policy.h").is_file()


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_a_manifest_edited_after_signing_is_refused(signed, name):
    doc = json.loads((signed / "manifest.json").read_text())
    doc["timing"]["hold_s"] = 4.0  # within bounds: only the signature can tell
    (signed / "manifest.json").write_text(json.dumps(doc))
    with pytest.raises(BundleSignatureError):
        ENTRY_POINTS[name](signed)


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_an_unlisted_planner_is_refused(tmp_path, monkeypatch, name):
    from edgerl.runtime.bundle_sign import generate_keypair, sign_manifest

    priv, pub = generate_keypair(tmp_path / "keys")
    bundle = write_mlp_bundle(tmp_path / "bundle", hidden=(8,), planner=True)
    _unlisted_planner(bundle)
    sign_manifest(bundle, priv)  # the manifest without the planner is genuinely signed
    shutil.copy(bundle.parent / "p.onnx", bundle / "planner.onnx")  # then the file appears
    monkeypatch.setenv("EDGERL_BUNDLE_PUBKEY", str(pub))
    with pytest.raises(UnlistedFileError, match="planner.onnx"):
        ENTRY_POINTS[name](bundle)
