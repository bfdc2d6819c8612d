"""The files of a bundle: names that stay inside it, and their sha256.

A bundle is a closed set: ``manifest.files`` maps each file's name (relative, inside the bundle
directory) to its sha256, and the loader reads no file that is not listed there.

Rules for a ``files`` name (:func:`member_path`): a non-empty relative POSIX path with no
``..``, ``.`` or empty parts, no backslash, no NUL, no drive or leading ``/``; and the path,
with every symlink resolved, must still lie inside the bundle directory. Anything else is a
:class:`~edgerl.contract.bundle_errors.BundlePathError`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from edgerl.contract.bundle_errors import (
    BundleFileError,
    BundleHashError,
    BundlePathError,
    UnlistedFileError,
)

__all__ = ["SHA256_RE", "member_path", "read_capped", "read_member", "sha256_file",
           "verify_files"]

SHA256_RE = re.compile(r"[0-9a-f]{64}")


def sha256_file(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk_size):
            digest.update(block)
    return digest.hexdigest()


def read_capped(path: Path, max_bytes: int, what: str = "",
                error: type[Exception] = BundleFileError,
                size_error: type[Exception] | None = None) -> bytes:
    """The bytes of ``path``, read once and never past ``max_bytes + 1``.

    Raises ``error`` when the file cannot be read and ``size_error`` (default: ``error``) when
    it holds more than ``max_bytes``; ``what`` ("private key") names the file in both messages.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        the = f" the {what}" if what else ""
        raise error(f"{path}: cannot read{the} ({exc.strerror})") from None
    if len(data) > max_bytes:
        limit = f"too large for a {what}" if what else f"larger than {max_bytes} bytes"
        raise (size_error or error)(f"{path}: {limit}")
    return data


def member_path(bundle_dir: Path, name: object) -> Path:
    """``bundle_dir / name`` after checking that ``name`` stays inside the bundle.

    Raises:
        BundlePathError: the name is not a plain relative path, or a symlink leads out.
    """
    shown = repr(name)[:80]
    if not isinstance(name, str) or not name:
        raise BundlePathError(f"files[{shown}]: a file name must be a non-empty string")
    if "\\" in name or "\0" in name or ":" in name[:2]:
        raise BundlePathError(f"files[{shown}]: backslash, NUL or drive in a file name")
    pure = PurePosixPath(name)
    if pure.is_absolute():
        raise BundlePathError(f"files[{shown}]: absolute path; names are relative to the "
                              "bundle directory")
    parts = name.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise BundlePathError(f"files[{shown}]: '..', '.' or empty path parts are not allowed "
                              "(a file must stay inside the bundle)")
    root = bundle_dir.resolve()
    path = bundle_dir / name
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise BundlePathError(f"files[{shown}]: cannot resolve ({exc})") from None
    if not resolved.is_relative_to(root):
        raise BundlePathError(f"files[{shown}]: a symlink leads out of the bundle (to "
                              f"{resolved})")
    return path


def manifest_path(bundle_dir: Path, name: str = "manifest.json") -> Path:
    """``bundle_dir / name``, refusing a manifest that is a symlink leading out of the bundle
    (its bytes would come from elsewhere while every file it lists is checked inside).

    Raises:
        BundlePathError: the manifest resolves outside ``bundle_dir`` (or cannot resolve).
    """
    path = bundle_dir / name
    if not path.is_symlink():
        return path
    try:
        resolved = path.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # a symlink loop
        raise BundlePathError(f"{path}: the manifest cannot be resolved ({exc})") from None
    if not resolved.is_relative_to(bundle_dir.resolve()):
        raise BundlePathError(f"{path}: the manifest is a symlink that leads out of the bundle "
                              f"(to {resolved}); a bundle's manifest must be a file inside it")
    return path


def verify_files(bundle_dir: Path, files: Mapping[str, str]) -> None:
    """Check every listed file: inside the bundle, present, and with the listed sha256.

    Raises:
        BundlePathError: a name leaves the bundle.
        BundleFileError: a listed file is missing (or not a regular file).
        BundleHashError: a digest is malformed or does not match the file.
    """
    for name, expected in files.items():
        path = member_path(bundle_dir, name)
        if not path.is_file():
            raise BundleFileError(f"{path}: listed in the manifest but missing")
        if not isinstance(expected, str) or not SHA256_RE.fullmatch(expected):
            raise BundleHashError(f"files[{name!r}]: {str(expected)[:20]!r} is not a sha256 "
                                  "hex digest (64 lowercase hex digits)")
        actual = sha256_file(path)
        if actual != expected:
            raise BundleHashError(f"{path}: sha256 mismatch (manifest {expected[:12]}..., file "
                                  f"{actual[:12]}...); the file was modified or replaced")


def read_member(bundle_dir: Path, name: str, files: Mapping[str, str],
                max_bytes: int = 64 << 20) -> bytes:
    """The bytes of listed file ``name``, checked against its sha256 as read (no window
    between the check and the use)."""
    if name not in files:
        raise UnlistedFileError(f"{bundle_dir / name}: not listed in manifest.files, so its "
                                "hash cannot be checked; re-export the bundle")
    path = member_path(bundle_dir, name)
    data = read_capped(path, max_bytes)
    if hashlib.sha256(data).hexdigest() != files[name]:
        raise BundleHashError(f"{path}: sha256 mismatch; the file was modified or replaced")
    return data
