"""Optional ed25519 signing of a bundle's manifest (``pip install edgerl[sign]``).

The manifest lists every file's sha256, so a signature over the manifest's exact bytes
authenticates the whole bundle. ``manifest.sig`` is a small JSON document::

    {"alg": "ed25519", "key_id": "<first 16 hex of sha256(raw public key)>",
     "signature": "<base64 of the 64-byte signature over manifest.json's bytes>"}

Keys are PEM files: the private key PKCS#8 (written with mode 0600), the public key
SubjectPublicKeyInfo. ``edgerl keygen --out DIR`` writes both, ``edgerl sign BUNDLE --key KEY``
or ``edgerl export ... --sign-key KEY`` writes ``manifest.sig``, and the loader
(:func:`edgerl.runtime.bundle_check.verify_bundle`) verifies it whenever a public key is
configured (argument or ``$EDGERL_BUNDLE_PUBKEY``); then an unsigned, re-signed-by-another-key
or modified bundle is a :class:`~edgerl.contract.bundle_errors.BundleSignatureError`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from edgerl.contract.bundle_errors import BundleSignatureError
from edgerl.contract.bundle_files import read_capped

__all__ = ["PRIVATE_KEY_FILE", "PUBLIC_KEY_FILE", "SIG_NAME", "generate_keypair",
           "sign_manifest", "verify_manifest", "verify_manifest_bytes"]

SIG_NAME = "manifest.sig"
PRIVATE_KEY_FILE = "edgerl_ed25519.key"
PUBLIC_KEY_FILE = "edgerl_ed25519.pub"
_MAX_KEY_BYTES = 16 << 10


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:
        raise BundleSignatureError("bundle signing needs the 'cryptography' package "
                                   f"(pip install 'edgerl[sign]'): {exc}") from None
    return serialization, ed25519


def _read_small(path: Path, what: str) -> bytes:
    return read_capped(path, _MAX_KEY_BYTES, what, BundleSignatureError)


def _raw_public(public_key: Any) -> bytes:
    serialization, _ = _crypto()
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public_key: Any) -> str:
    """First 16 hex digits of the sha256 of the raw 32-byte public key."""
    return hashlib.sha256(_raw_public(public_key)).hexdigest()[:16]


def generate_keypair(out_dir: str | Path) -> tuple[Path, Path]:
    """Write a new ed25519 key pair into ``out_dir``: ``(private_key_path, public_key_path)``.
    Refuses to overwrite an existing key."""
    serialization, ed25519 = _crypto()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    priv_path, pub_path = out / PRIVATE_KEY_FILE, out / PUBLIC_KEY_FILE
    for p in (priv_path, pub_path):
        if p.exists():
            raise FileExistsError(f"{p}: exists; refusing to overwrite a key")
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    fd = os.open(priv_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    pub_path.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return priv_path, pub_path


def _load_private(path: Path) -> Any:
    serialization, ed25519 = _crypto()
    try:
        key = serialization.load_pem_private_key(_read_small(path, "private key"), None)
    except (ValueError, TypeError) as exc:
        raise BundleSignatureError(f"{path}: not an unencrypted PEM private key ({exc})") \
            from None
    if not isinstance(key, ed25519.Ed25519PrivateKey):
        raise BundleSignatureError(f"{path}: not an ed25519 key ({type(key).__name__})")
    return key


def _load_public(path: Path) -> Any:
    serialization, ed25519 = _crypto()
    try:
        key = serialization.load_pem_public_key(_read_small(path, "public key"))
    except (ValueError, TypeError) as exc:
        raise BundleSignatureError(f"{path}: not a PEM public key ({exc})") from None
    if not isinstance(key, ed25519.Ed25519PublicKey):
        raise BundleSignatureError(f"{path}: not an ed25519 key ({type(key).__name__})")
    return key


def sign_manifest(bundle_dir: str | Path, private_key: str | Path) -> Path:
    """Sign ``bundle_dir/manifest.json`` with ``private_key`` (PEM); returns the signature
    path (``manifest.sig``)."""
    bundle_dir = Path(bundle_dir)
    manifest = bundle_dir / "manifest.json"
    if not manifest.is_file():
        raise BundleSignatureError(f"{manifest}: no manifest to sign")
    key = _load_private(Path(private_key))
    sig = key.sign(manifest.read_bytes())
    doc = {"alg": "ed25519", "key_id": key_id(key.public_key()),
           "signature": base64.b64encode(sig).decode("ascii")}
    path = bundle_dir / SIG_NAME
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def verify_manifest_bytes(data: bytes, sig_path: Path, public_key: str | Path) -> None:
    """Check ``sig_path`` (a ``manifest.sig``) against the manifest ``data`` with
    ``public_key`` (PEM); raises :class:`BundleSignatureError` naming the problem."""
    pub = _load_public(Path(public_key))
    if not sig_path.is_file():
        raise BundleSignatureError(f"{sig_path}: missing; a public key is configured "
                                   f"({public_key}), so only signed bundles are loaded")
    try:
        doc = json.loads(_read_small(sig_path, "signature").decode("utf-8"))
        if not isinstance(doc, dict) or doc.get("alg") != "ed25519":
            raise ValueError("expected an object with alg 'ed25519'")
        sig = base64.b64decode(str(doc.get("signature", "")), validate=True)
    except (ValueError, UnicodeDecodeError, RecursionError, binascii.Error) as exc:
        raise BundleSignatureError(f"{sig_path}: unreadable signature file ({exc})") from None
    from cryptography.exceptions import InvalidSignature

    try:
        pub.verify(sig, data)
    except InvalidSignature:
        want = key_id(pub)
        other = doc.get("key_id")
        hint = f"signed by key {other}, not {want}" if other and other != want else \
            "the manifest was modified after signing"
        raise BundleSignatureError(f"{sig_path}: signature does not verify with {public_key} "
                                   f"({hint})") from None


def verify_manifest(manifest: Path, public_key: str | Path) -> bytes:
    """Read ``manifest`` and verify it against ``manifest.sig`` beside it; returns the bytes
    that were verified (parse these, not a second read)."""
    from edgerl.contract.spec import read_manifest_bytes

    data = read_manifest_bytes(manifest)
    verify_manifest_bytes(data, manifest.parent / SIG_NAME, public_key)
    return data
