"""``"key=value,key=value"`` specs on the command line (``--operator``, ``--region``): one
parser, so every such flag reports an unknown key or a bad value the same way."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["SpecValueError", "parse_key_values"]


class SpecValueError(ValueError):
    """A converter's own complaint about a value; :func:`parse_key_values` keeps its text."""


def parse_key_values(text: str, what: str,
                     fields: Mapping[str, tuple[str, Callable[[str], Any]]]) -> dict[str, Any]:
    """``text`` (comma-separated ``key=value``, any subset, blanks ignored) as ``{field:
    convert(value)}`` for ``fields`` ``{key: (field name, convert)}``.

    Raises:
        ValueError: ``"{what}: 'item' is not KEY=VALUE with KEY one of ..."`` for an unknown
            key or an item without ``=``; ``"{what}: key='value' is not a number"`` when
            ``convert`` raises ``ValueError``; ``"{what}: <its message>"`` when it raises
            :class:`SpecValueError`.
    """
    kw: dict[str, Any] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in fields:
            raise ValueError(f"{what}: {item!r} is not KEY=VALUE with KEY one of "
                             f"{', '.join(fields)}")
        name, convert = fields[key]
        try:
            kw[name] = convert(value)
        except SpecValueError as exc:
            raise ValueError(f"{what}: {exc}") from None
        except ValueError:
            raise ValueError(f"{what}: {key}={value!r} is not a number") from None
    return kw
