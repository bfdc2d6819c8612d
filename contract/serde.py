"""Strict dataclass <-> JSON-dict conversion used by the manifest and the configs.

``from_dict`` walks a dataclass's type hints and checks every value, so a manifest with a
missing field, an unknown field or a wrong type fails with a :class:`SchemaError` whose message
names the field by its dotted path (``manifest.action.low[2]: expected a number, got 'x'``).
Supported annotations: ``int``, ``float``, ``str``, ``bool``, ``Any``, ``list[T]``,
``tuple[T, ...]``, ``dict[str, T]``, ``T | None`` and nested dataclasses.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from typing import Any, TypeVar, Union

T = TypeVar("T")

__all__ = ["SchemaError", "from_dict", "to_dict"]


class SchemaError(ValueError):
    """A document does not match its schema; the message starts with the field's path."""


def to_dict(obj: Any) -> Any:
    """Convert a dataclass (recursively) to plain JSON types; tuples become lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    if hasattr(obj, "tolist"):  # numpy scalars / arrays
        return obj.tolist()
    return obj


def from_dict(cls: type[T], data: Any, path: str = "config") -> T:
    """Build ``cls`` from ``data``, checking every field; raise :class:`SchemaError`."""
    if not isinstance(data, dict):
        raise SchemaError(f"{path}: expected an object, got {_describe(data)}")
    hints, fields = _schema(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise SchemaError(f"{path}.{unknown[0]}: unknown field (known: {', '.join(fields)})")
    kwargs: dict[str, Any] = {}
    for name, field in fields.items():
        where = f"{path}.{name}"
        if name not in data:
            required = (field.default is dataclasses.MISSING
                        and field.default_factory is dataclasses.MISSING)
            if required:
                raise SchemaError(f"{where}: missing required field")
            continue
        kwargs[name] = _convert(hints[name], data[name], where)
    try:
        return cls(**kwargs)
    except SchemaError:
        raise
    except (ValueError, TypeError) as exc:
        raise SchemaError(f"{path}: {exc}") from exc


@functools.cache
def _schema(cls: type) -> tuple[dict[str, Any], dict[str, dataclasses.Field]]:
    """``(type hints, init fields)`` of a dataclass, resolved once per class (resolving the
    string annotations compiles them: 70 % of a manifest load before this cache)."""
    return typing.get_type_hints(cls), {f.name: f for f in dataclasses.fields(cls) if f.init}


def _describe(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"[:80]


def _convert(tp: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _convert(inner[0], value, path)
        for candidate in inner:
            try:
                return _convert(candidate, value, path)
            except SchemaError:
                continue
        raise SchemaError(f"{path}: {_describe(value)} matches none of {tp}")
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, path)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise SchemaError(f"{path}: expected a list, got {_describe(value)}")
        item = args[0] if args else Any
        items = [_convert(item, v, f"{path}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise SchemaError(f"{path}: expected an object, got {_describe(value)}")
        item = args[1] if len(args) == 2 else Any
        return {str(k): _convert(item, v, f"{path}.{k}") for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise SchemaError(f"{path}: expected true/false, got {_describe(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SchemaError(f"{path}: expected an integer, got {_describe(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaError(f"{path}: expected a number, got {_describe(value)}")
        if not math.isfinite(value):
            raise SchemaError(f"{path}: expected a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise SchemaError(f"{path}: expected a string, got {_describe(value)}")
        return value
    raise TypeError(f"{path}: unsupported annotation {tp!r}")
