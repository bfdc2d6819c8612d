"""``edgerl sign BUNDLE --key KEY``: write ``BUNDLE/manifest.sig`` (ed25519).

The bundle is fully verified first (hashes, parity, bounds, ONNX shapes), so only a bundle the
runtime would load gets signed. The manifest lists every file's sha256, so the signature
covers the whole bundle.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "sign a bundle's manifest with an ed25519 private key (writes manifest.sig)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", type=Path, help="bundle directory (holds manifest.json)")
    p.add_argument("--key", type=Path, required=True,
                   help="ed25519 private key (PEM) from `edgerl keygen`")


def run(args: argparse.Namespace) -> int:
    from edgerl.runtime.bundle_check import verify_bundle
    from edgerl.runtime.bundle_sign import sign_manifest

    verify_bundle(args.bundle, check_onnx=True, check_signature=False)
    path = sign_manifest(args.bundle, args.key)
    print(f"wrote {path}")
    return 0
