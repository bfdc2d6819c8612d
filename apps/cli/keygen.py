"""``edgerl keygen --out DIR``: an ed25519 key pair for signing bundles.

Writes ``DIR/edgerl_ed25519.key`` (PKCS#8 PEM, mode 0600: keep it on the build machine) and
``DIR/edgerl_ed25519.pub`` (give it to the robot: ``EDGERL_BUNDLE_PUBKEY`` or ``--pubkey``).
Needs the ``cryptography`` package (``pip install 'edgerl[sign]'``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "write an ed25519 key pair for signing bundles (edgerl sign / export --sign-key)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument_group("output").add_argument(
        "--out", type=Path, required=True, help="directory for the two key files")


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.errors import CliError
    from edgerl.contract.bundle_errors import BundleSignatureError
    from edgerl.runtime.bundle_sign import generate_keypair

    try:
        priv, pub = generate_keypair(args.out)
    except (FileExistsError, OSError, BundleSignatureError) as exc:
        raise CliError(str(exc)) from None  # no bundle involved: exit 1, not 2
    print(f"private key: {priv} (keep secret)\npublic key:  {pub} "
          "(set EDGERL_BUNDLE_PUBKEY on the robot)")
    return 0
