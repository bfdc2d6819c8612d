"""CLI flags generated from a config dataclass's fields and docstrings (CleanRL/tyro style).

A field becomes a flag: its name from the field (``num_envs`` -> ``--num-envs``, nested fields
by their leaf name, ``ppo.learning_rate`` -> ``--learning-rate``), its type from the annotation
(``bool`` -> ``--x/--no-x``, ``X | None`` -> ``X``, ``tuple[X, ...]`` -> one or more ``X``),
its default from the field, its choices from ``metadata={"choices": ...}`` and its help from
``metadata={"help": ...}`` or else the class docstring's ``Attributes:`` entry. So ``--help``
and the config cannot drift: change the field and the flag follows.

>>> flags = add_dataclass_flags(parser, TrainConfig, ["method", "seed", "ppo.learning_rate"])
>>> values = flag_values(parser.parse_args(argv), flags)   # {"ppo.learning_rate": 1e-3, ...}
>>> cfg = replace_paths(TrainConfig(task="cartpole", method="edit"), values)
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ConfigFlag", "add_dataclass_flags", "dataclass_flags", "field_docs", "flag_values",
           "replace_paths"]

_ENTRY = re.compile(r"^(\s+)([\w /]+?):\s+(.*)$")
_ROLE = re.compile(r":\w+:`~?([^`]+)`")


@dataclass(frozen=True)
class ConfigFlag:
    """One generated flag: the dataclass field it sets and how argparse reads it.

    Attributes:
        path: Dotted field path from the top dataclass, e.g. ``"ppo.learning_rate"``.
        flag: The option string, e.g. ``"--learning-rate"``.
        dest: The namespace attribute argparse writes (the flag name, ``_`` for ``-``).
        help: The help text shown by ``--help`` (never empty).
        kwargs: The other ``add_argument`` keywords (type, default, choices, ...).
    """

    path: str
    flag: str
    dest: str
    help: str
    kwargs: dict[str, Any] = field(default_factory=dict)


def field_docs(cls: type) -> dict[str, str]:
    """``field -> one-paragraph help`` from the ``Attributes:`` section of ``cls``'s docstring
    (Google style; ``a / b: text`` documents both), reST roles and literals made plain."""
    doc = inspect.getdoc(cls) or ""
    lines = doc.splitlines()
    out: dict[str, str] = {}
    names: list[str] = []
    inside = False
    for line in lines:
        if line.strip() == "Attributes:":
            inside = True
            continue
        if not inside:
            continue
        if line and not line.startswith(" "):  # the next section
            break
        entry = _ENTRY.match(line)
        if entry and len(entry.group(1)) <= 4:
            names = [n.strip() for n in entry.group(2).split("/")]
            for name in names:
                out[name] = entry.group(3).strip()
        elif line.strip() and names:
            for name in names:
                out[name] += " " + line.strip()
    return {k: _ROLE.sub(r"\1", v).replace("``", "") for k, v in out.items()}


def _field(cls: type, path: str) -> tuple[dataclasses.Field, Any, type]:
    """``(field, resolved annotation, owning class)`` of the dotted ``path`` in ``cls``."""
    owner: Any = cls
    *parents, leaf = path.split(".")
    for name in parents:
        owner = typing.get_type_hints(owner)[name]
    fields = {f.name: f for f in dataclasses.fields(owner)}
    if leaf not in fields:
        raise KeyError(f"{cls.__name__} has no field {path!r}")
    return fields[leaf], typing.get_type_hints(owner)[leaf], owner


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _argparse_kwargs(annotation: Any) -> dict[str, Any]:
    """``type``/``nargs``/``action`` for an annotation (``X | None`` is read as ``X``)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation = args[0]
    if annotation is bool:
        return {"action": argparse.BooleanOptionalAction}
    if typing.get_origin(annotation) in (tuple, list):
        inner = typing.get_args(annotation)[0]
        return {"type": inner, "nargs": "+"}
    if annotation in (int, float, str):
        return {"type": annotation}
    if callable(annotation):  # e.g. Path
        return {"type": annotation}
    raise TypeError(f"no flag for a field of type {annotation!r}")


def dataclass_flags(cls: type, include: Iterable[str], *,
                    names: Mapping[str, str] | None = None,
                    defaults: Mapping[str, Any] | None = None,
                    default_text: Mapping[str, str] | None = None) -> list[ConfigFlag]:
    """One :class:`ConfigFlag` per field path in ``include``, in order.

    ``names`` renames a flag (``{"num_steps_per_env": "steps-per-env"}``), ``defaults``
    replaces a field's default (``None`` = unset, e.g. "use the task's default"), and
    ``default_text`` says in words what a ``None`` default means (``{field_default}`` in it
    is the field's own default). Help is the field's
    ``metadata["help"]`` or docstring entry with the default appended.
    """
    names, defaults, default_text = dict(names or {}), dict(defaults or {}), \
        dict(default_text or {})
    flags = []
    for path in include:
        f, annotation, owner = _field(cls, path)
        name = names.get(path, f.name.replace("_", "-"))
        text = f.metadata.get("help") or field_docs(owner).get(f.name, "")
        if not text:
            raise ValueError(f"{owner.__name__}.{f.name}: no help (add it to the class "
                             "docstring's Attributes: or to metadata={'help': ...})")
        shown = default_text.get(path, "%(default)s").format(field_default=_field_default(f))
        help_text = f"{text.rstrip('.').replace('%', '%%')} (default: {shown})"
        kwargs = {"default": defaults[path] if path in defaults else _field_default(f),
                  **_argparse_kwargs(annotation)}
        if "choices" in f.metadata:
            kwargs["choices"] = tuple(f.metadata["choices"])
        elif "action" not in kwargs:
            kwargs["metavar"] = name.upper().replace("-", "_")
        flags.append(ConfigFlag(path, f"--{name}", name.replace("-", "_"), help_text, kwargs))
    return flags


def add_dataclass_flags(parser: argparse.ArgumentParser, cls: type, include: Iterable[str],
                        **options: Any) -> list[ConfigFlag]:
    """Add :func:`dataclass_flags` ``(cls, include, **options)`` to ``parser``; returns them."""
    flags = dataclass_flags(cls, include, **options)
    for flag in flags:
        parser.add_argument(flag.flag, dest=flag.dest, help=flag.help, **flag.kwargs)
    return flags


def flag_values(args: argparse.Namespace, flags: Iterable[ConfigFlag]) -> dict[str, Any]:
    """``field path -> parsed value`` for every generated flag (``None`` = left unset)."""
    out = {}
    for flag in flags:
        value = getattr(args, flag.dest)
        out[flag.path] = tuple(value) if isinstance(value, list) else value
    return out


def replace_paths(obj: Any, values: Mapping[str, Any]) -> Any:
    """A copy of the dataclass ``obj`` with each dotted field path set to its value (nested
    dataclasses copied with :func:`dataclasses.replace`; ``obj`` itself is not changed)."""
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for path, value in values.items():
        head, _, rest = path.partition(".")
        if rest:
            nested.setdefault(head, {})[rest] = value
        else:
            top[head] = value
    for head, sub in nested.items():
        top[head] = replace_paths(getattr(obj, head), sub)
    return dataclasses.replace(obj, **top) if top else obj
