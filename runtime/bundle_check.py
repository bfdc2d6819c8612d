"""Everything checked before a bundle may drive a robot: :func:`verify_bundle`.

In order (the first failure is raised, one :class:`~edgerl.contract.bundle_errors.BundleError`
subclass each, message naming the file or field):

1. ``manifest.sig`` when a public key is configured (argument, or the environment variable
   ``EDGERL_BUNDLE_PUBKEY``): :class:`BundleSignatureError` (:mod:`edgerl.runtime.bundle_sign`).
2. ``manifest.json`` parses strictly (size, UTF-8, JSON, nesting, schema):
   ``Manifest*Error`` (:mod:`edgerl.contract.manifest_json`, :mod:`edgerl.contract.spec`).
3. Semantic bounds: :class:`ManifestValueError` (:mod:`edgerl.runtime.manifest_rules`).
4. Every ``files`` entry stays inside the bundle and matches its sha256:
   :class:`BundlePathError`, :class:`BundleFileError`, :class:`BundleHashError`.
5. Closed set: a file the loaders read (:data:`LOADER_FILES`) that is present but not listed
   is an :class:`UnlistedFileError` (it would be read unhashed).
6. ``parity.json`` is listed and every check in it passed: :class:`ParityError`. A bundle
   that lists no network (no ``.onnx``/``.npz``/``.engine``/``.h``) has nothing to prove and
   needs none. There is no override: re-export to fix a failed parity.
7. Every listed ONNX file loads in onnxruntime with the manifest's tensor names and sizes:
   :class:`OnnxModelError`, :class:`OnnxShapeError` (:mod:`edgerl.runtime.onnx_check`;
   only with ``check_onnx=True``); ``planner.onnx``'s intent output against
   ``edit_obs.intent_dim``: :class:`IntentMismatchError`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from edgerl.contract.bundle_errors import (
    BundleError,
    BundleFileError,
    ParityError,
    UnlistedFileError,
)
from edgerl.contract.bundle_files import manifest_path, read_member, verify_files
from edgerl.contract.manifest_json import parse_json_document
from edgerl.contract.spec import MANIFEST_NAME, PolicySpec, read_manifest_bytes
from edgerl.runtime.manifest_rules import ManifestLimits, check_manifest_values

__all__ = ["LOADER_FILES", "NETWORK_SUFFIXES", "PARITY_FILE", "PUBKEY_ENV", "check_closed_set",
           "check_parity", "resolve_pubkey", "verify_bundle"]

log = logging.getLogger(__name__)

PARITY_FILE = "parity.json"
PUBKEY_ENV = "EDGERL_BUNDLE_PUBKEY"
#: Every file some loader of the runtime opens when present (policy backends, TensorRT
#: engine, planners, the language planner's encoder, tokenizer and cached embeddings).
LOADER_FILES = ("policy.onnx", "policy_mlp.npz", "policy_fp16.onnx", "policy.engine",
                "planner.onnx", "gate.onnx", "encoder.onnx", "tokenizer.json", "instructions.npz",
                PARITY_FILE)
NETWORK_SUFFIXES = (".onnx", ".npz", ".engine", ".h")


def resolve_pubkey(pubkey: str | Path | None) -> Path | None:
    """The public key to verify with: ``pubkey``, else ``$EDGERL_BUNDLE_PUBKEY``, else None."""
    if pubkey is not None and str(pubkey) != "":
        return Path(pubkey)
    env = os.environ.get(PUBKEY_ENV, "")
    return Path(env) if env else None


def check_closed_set(bundle_dir: Path, spec: PolicySpec) -> None:
    """Refuse a loader file that is present but unlisted (it would be read unhashed)."""
    for name in LOADER_FILES:
        if name not in spec.files and (bundle_dir / name).exists():
            raise UnlistedFileError(f"{bundle_dir / name}: not listed in manifest.files, so "
                                    "its hash cannot be checked; re-export the bundle (or "
                                    "remove the file)")


def check_parity(bundle_dir: Path, spec: PolicySpec) -> dict | None:
    """The parsed ``parity.json`` (None for a bundle without networks); raises
    :class:`ParityError` when it is missing, unlisted, unreadable or records a failure."""
    networks = [n for n in spec.files if n.endswith(NETWORK_SUFFIXES)]
    if PARITY_FILE not in spec.files:
        if not networks:
            return None
        raise ParityError(f"{bundle_dir / PARITY_FILE}: missing from manifest.files; a bundle "
                          f"with networks ({', '.join(networks)}) must carry the exporter's "
                          "passed parity report")
    try:
        doc = parse_json_document(read_member(bundle_dir, PARITY_FILE, spec.files),
                                  PARITY_FILE)
    except BundleError as exc:
        raise ParityError(f"{bundle_dir / PARITY_FILE}: unreadable ({exc})") from None
    checks = doc.get("parity")
    if not isinstance(checks, dict):
        raise ParityError(f"{bundle_dir / PARITY_FILE}: no 'parity' object of checks")
    failed = [str(name) for name, c in checks.items()
              if not (isinstance(c, dict) and c.get("ok") is True)]
    if doc.get("ok") is not True or failed:
        raise ParityError(f"{bundle_dir / PARITY_FILE}: parity failed "
                          f"(ok={doc.get('ok')!r}; failed checks: {', '.join(failed) or '-'}); "
                          "the exported networks do not match their source; re-export")
    return doc


def verify_bundle(bundle_dir: str | Path, *, pubkey: str | Path | None = None,
                  limits: ManifestLimits | None = None, check_onnx: bool = False,
                  check_signature: bool = True) -> PolicySpec:
    """The bundle's :class:`PolicySpec` after every check in the module docstring.

    Args:
        bundle_dir: Directory holding ``manifest.json``.
        pubkey: Ed25519 public key file (PEM); None: ``$EDGERL_BUNDLE_PUBKEY`` if set, else no
            signature check.
        limits: Semantic bounds (default :class:`ManifestLimits`).
        check_onnx: Also open every listed ONNX file in onnxruntime and compare its inputs
            and outputs with the manifest (slower: ~1 s for the language encoder).
        check_signature: False skips step 1 (``edgerl sign`` checks a bundle before signing).
    """
    bundle_dir = Path(bundle_dir)
    if not bundle_dir.is_dir():
        raise BundleFileError(f"{bundle_dir}: bundle directory not found")
    key = resolve_pubkey(pubkey) if check_signature else None
    manifest = manifest_path(bundle_dir, MANIFEST_NAME)
    if key is not None:
        from edgerl.runtime.bundle_sign import verify_manifest

        data = verify_manifest(manifest, key)
    else:
        data = read_manifest_bytes(manifest)
    try:
        spec = PolicySpec.from_json(data)
        check_manifest_values(spec, limits)
    except BundleError as exc:  # the same class, with the manifest's path in front
        raise type(exc)(f"{manifest}: {exc}") from None
    verify_files(bundle_dir, spec.files)
    check_closed_set(bundle_dir, spec)
    check_parity(bundle_dir, spec)
    if check_onnx:
        from edgerl.runtime.onnx_check import check_bundle_onnx

        check_bundle_onnx(bundle_dir, spec)
    log.debug("bundle %s verified (%d files%s)", bundle_dir, len(spec.files),
              ", signature ok" if key is not None else "")
    return spec
