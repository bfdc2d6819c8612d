"""ed25519 signing of the manifest: keygen, sign, verify at load when a key is configured."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

pytest.importorskip("cryptography", reason="signing needs the 'sign' extra (cryptography)")

from edgerl.apps.cli import main
from edgerl.contract.bundle_errors import BundleSignatureError
from edgerl.runtime.bundle import load_bundle
from edgerl.runtime.bundle_check import PUBKEY_ENV, verify_bundle
from edgerl.runtime.bundle_sign import (
    SIG_NAME,
    generate_keypair,
    sign_manifest,
)


@pytest.fixture
def keys(tmp_path):
    return generate_keypair(tmp_path / "keys")


def test_keygen_writes_a_private_key_only_the_owner_reads(keys):
    priv, pub = keys
    assert stat.S_IMODE(os.stat(priv).st_mode) == 0o600
    assert priv.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert pub.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    with pytest.raises(FileExistsError):
        generate_keypair(priv.parent)


def test_signed_bundle_verifies_and_loads(mlp_bundle, keys):
    priv, pub = keys
    sig = sign_manifest(mlp_bundle, priv)
    doc = json.loads(sig.read_text())
    assert doc["alg"] == "ed25519" and len(doc["key_id"]) == 16
    spec, net = load_bundle(mlp_bundle, pubkey=pub, warmup=1)
    assert spec.method == "edit" and net is not None


def test_unsigned_bundle_is_refused_when_a_key_is_configured(mlp_bundle, keys, monkeypatch):
    _, pub = keys
    verify_bundle(mlp_bundle)  # no key configured: no signature needed
    monkeypatch.setenv(PUBKEY_ENV, str(pub))
    with pytest.raises(BundleSignatureError, match="manifest.sig: missing"):
        load_bundle(mlp_bundle)


def test_tampered_manifest_is_refused(mlp_bundle, keys):
    """Signing is what catches an edited manifest (e.g. limits widened to a value the
    semantic bounds still accept)."""
    priv, pub = keys
    sign_manifest(mlp_bundle, priv)
    path = mlp_bundle / "manifest.json"
    doc = json.loads(path.read_text())
    doc["action"]["high"] = [2.0, 2.0]
    path.write_text(json.dumps(doc, indent=2) + "\n")
    verify_bundle(mlp_bundle)  # valid on its own ...
    with pytest.raises(BundleSignatureError, match="modified after signing"):
        verify_bundle(mlp_bundle, pubkey=pub)  # ... but not what was signed


def test_another_key_is_refused(mlp_bundle, keys, tmp_path):
    priv, _ = keys
    _, other_pub = generate_keypair(tmp_path / "other")
    sign_manifest(mlp_bundle, priv)
    with pytest.raises(BundleSignatureError, match="signed by key [0-9a-f]{16}, not"):
        verify_bundle(mlp_bundle, pubkey=other_pub)


def test_garbage_signature_and_key_files_are_named(mlp_bundle, keys, tmp_path):
    priv, pub = keys
    (mlp_bundle / SIG_NAME).write_bytes(b"\xff\x00not json")
    with pytest.raises(BundleSignatureError, match="unreadable signature file"):
        verify_bundle(mlp_bundle, pubkey=pub)
    bad_key = tmp_path / "bad.pub"
    bad_key.write_text("not a key")
    with pytest.raises(BundleSignatureError, match="not a PEM public key"):
        verify_bundle(mlp_bundle, pubkey=bad_key)


def test_cli_keygen_sign_inspect(mlp_bundle, tmp_path, capsys):
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    priv, pub = tmp_path / "k" / "edgerl_ed25519.key", tmp_path / "k" / "edgerl_ed25519.pub"
    assert main(["inspect", str(mlp_bundle), "--pubkey", str(pub)]) == 2
    assert "bundle refused (BundleSignatureError)" in capsys.readouterr().err
    assert main(["sign", str(mlp_bundle), "--key", str(priv)]) == 0
    assert "manifest.sig" in capsys.readouterr().out
    assert main(["inspect", str(mlp_bundle), "--pubkey", str(pub), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["signature_verified"] is True
    assert {f["file"] for f in doc["files"]} == {"policy.onnx", "policy_mlp.npz", "parity.json"}


def test_inspect_subprocess_refuses_tampered_signed_bundle(mlp_bundle, keys):
    priv, pub = keys
    sign_manifest(mlp_bundle, priv)
    (mlp_bundle / "manifest.json").write_text(
        (mlp_bundle / "manifest.json").read_text().replace('"task": "test-task"',
                                                           '"task": "other"'))
    env = {**os.environ, PUBKEY_ENV: str(pub)}
    proc = subprocess.run([sys.executable, "-m", "edgerl.apps", "inspect", str(mlp_bundle)],
                          capture_output=True, text=True, timeout=120, check=False, env=env)
    assert proc.returncode == 2
    assert "BundleSignatureError" in proc.stderr and "Traceback" not in proc.stderr
