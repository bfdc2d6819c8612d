"""The named errors of a bundle that must not be loaded.

Every way a bundle on disk can be unusable is one subclass of :class:`BundleError` (itself a
``ValueError``), so callers catch one class and users read one line naming the file or the
manifest field. ``edgerl`` exits with status 2 on any of them (see ``docs/export.md``).

Manifest errors that the schema layer also reports (:class:`ManifestSchemaError` and the
parse errors) derive from :class:`~edgerl.contract.serde.SchemaError` too, so older ``except
SchemaError`` handlers still catch them.
"""

from __future__ import annotations

from edgerl.contract.serde import SchemaError

__all__ = [
    "BundleError",
    "BundleFileError",
    "BundleHashError",
    "BundlePathError",
    "BundleSignatureError",
    "IntentMismatchError",
    "ManifestEncodingError",
    "ManifestNestingError",
    "ManifestSchemaError",
    "ManifestSizeError",
    "ManifestSyntaxError",
    "ManifestValueError",
    "OnnxModelError",
    "OnnxShapeError",
    "ParityError",
    "UnlistedFileError",
]


class BundleError(ValueError):
    """A bundle on disk is unusable (missing file, hash mismatch, bad manifest)."""


class BundleFileError(BundleError):
    """The bundle directory, its manifest or a listed file is missing or unreadable."""


class BundleHashError(BundleError):
    """A listed file's sha256 differs from the manifest's."""


class BundlePathError(BundleError):
    """A ``files`` entry leaves the bundle (``..``, absolute path, symlink out)."""


class UnlistedFileError(BundleError):
    """A file the loader would read is present but not listed (so not hashed) in
    ``manifest.files``."""


class ParityError(BundleError):
    """``parity.json`` is missing, unlisted, unreadable or records a failed check."""


class BundleSignatureError(BundleError):
    """A public key is configured and ``manifest.sig`` is missing, does not verify, or the
    signing support (the ``cryptography`` package) is absent."""


class ManifestSizeError(BundleError):
    """``manifest.json`` is larger than any real manifest (a size cap, read before parsing)."""


class ManifestEncodingError(BundleError, SchemaError):
    """``manifest.json`` is not UTF-8 text."""


class ManifestSyntaxError(BundleError, SchemaError):
    """``manifest.json`` is not strict JSON (syntax, NaN/Infinity, a number out of range)."""


class ManifestNestingError(BundleError, SchemaError):
    """``manifest.json`` nests objects/arrays deeper than any real manifest."""


class ManifestSchemaError(BundleError, SchemaError):
    """A manifest field is missing, unknown or of the wrong type (message starts with its
    dotted path)."""


class ManifestValueError(BundleError):
    """A manifest field is well-typed but outside the sane bounds the runtime accepts
    (message starts with its dotted path)."""


class OnnxModelError(BundleError):
    """A listed ONNX file is not a model onnxruntime can load."""


class OnnxShapeError(BundleError):
    """An ONNX model's input/output names or shapes disagree with the manifest."""


class IntentMismatchError(OnnxShapeError):
    """``planner.onnx``'s ``intent`` output and the manifest's ``edit_obs.intent_dim`` (what
    the edit policy reads) disagree in size, or one of them is missing."""
