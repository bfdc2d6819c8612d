"""Strict, bounded parsing of ``manifest.json`` (and ``parity.json``) bytes.

``json.loads`` on hostile bytes raises ``UnicodeDecodeError``, ``RecursionError`` or a bare
``ValueError`` (an integer of 5,000 digits), and accepts ``NaN``, ``1e999`` (= inf) and
duplicate keys. :func:`parse_json_document` turns each into a named
:class:`~edgerl.contract.bundle_errors.BundleError` subclass:

======================  ==================================================================
error                   when
======================  ==================================================================
ManifestSizeError       more than :data:`MAX_MANIFEST_BYTES` bytes
ManifestEncodingError   not UTF-8
ManifestSyntaxError     not JSON; ``NaN``/``Infinity``; a float that overflows to inf; an
                        integer of more than :data:`MAX_INT_DIGITS` digits; a duplicated key
ManifestNestingError    objects/arrays nested deeper than :data:`MAX_DEPTH`
======================  ==================================================================
"""

from __future__ import annotations

import json
import math
from typing import Any

from edgerl.contract.bundle_errors import (
    ManifestEncodingError,
    ManifestNestingError,
    ManifestSizeError,
    ManifestSyntaxError,
)

__all__ = ["MAX_DEPTH", "MAX_INT_DIGITS", "MAX_MANIFEST_BYTES", "json_depth",
           "parse_json_document"]

#: A real manifest is 3-60 kB (a 384-wide observation with names, units, mean, std).
MAX_MANIFEST_BYTES = 8 << 20
#: A real manifest nests 5 levels (manifest.extra.language.parity.encoder); ``extra`` gets room.
MAX_DEPTH = 32
#: Larger integers are no count, size or step the runtime could use.
MAX_INT_DIGITS = 24


class _Reject(ValueError):
    """Raised inside the JSON hooks; turned into ManifestSyntaxError."""


def _constant(name: str) -> Any:
    raise _Reject(f"{name} is not allowed (strict JSON: every number must be finite)")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Reject(f"number {text[:24]} overflows to {value}")
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Reject(f"integer of {len(text)} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Reject(f"key {key[:40]!r} appears twice in one object")
        out[key] = value
    return out


def json_depth(doc: Any) -> int:
    """Nesting depth of a parsed document (a scalar is 0, ``[]`` is 1), without recursion."""
    deepest = 0
    stack = [(doc, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            deepest = max(deepest, depth)
            continue
        deepest = max(deepest, depth + 1)
        if depth + 1 > MAX_DEPTH:
            return depth + 1
        stack.extend((c, depth + 1) for c in children)
    return deepest


def parse_json_document(data: bytes, what: str = "manifest") -> dict[str, Any]:
    """The JSON object in ``data`` (UTF-8 bytes, optional BOM refused); named errors only.

    Raises:
        ManifestSizeError, ManifestEncodingError, ManifestSyntaxError, ManifestNestingError:
            see the module docstring; the message starts with ``what``.
    """
    if len(data) > MAX_MANIFEST_BYTES:
        raise ManifestSizeError(f"{what}: {len(data)} bytes, more than the "
                                f"{MAX_MANIFEST_BYTES} a manifest may have")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ManifestEncodingError(f"{what}: not UTF-8 text (byte {exc.start}: "
                                    f"{data[exc.start:exc.start + 4]!r})") from None
    try:
        doc = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int,
                         object_pairs_hook=_pairs)
    except RecursionError:
        raise ManifestNestingError(f"{what}: nested deeper than Python can parse (at most "
                                   f"{MAX_DEPTH} levels are allowed)") from None
    except json.JSONDecodeError as exc:
        raise ManifestSyntaxError(f"{what}: not valid JSON ({exc})") from None
    except ValueError as exc:  # _Reject, or int()'s own digit limit
        raise ManifestSyntaxError(f"{what}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise ManifestSyntaxError(f"{what}: expected a JSON object, got "
                                  f"{type(doc).__name__}")
    depth = json_depth(doc)
    if depth > MAX_DEPTH:
        raise ManifestNestingError(f"{what}: nested {depth}+ levels deep (at most {MAX_DEPTH})")
    return doc
