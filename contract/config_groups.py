"""Configs whose fields are grouped by concern, set by the fields' own names.

A config may hold some of its settings in small nested dataclasses (a planner client's
``reconnect`` timing, an experiment's ``collection`` settings), each field of which a group has
as its default (a dataclass instance, or a ``default_factory`` that makes one). Flags,
keyword overrides and config tables keep naming each setting by its own name
(``connect_timeout_s=3``, ``collect = 20``); :func:`build` and :func:`change` find the group
that holds it. A name a config holds at its top level is that field; a name two groups share
is an error (``TypeError``), as is a name nobody holds.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["build", "change", "setting_names"]


def _group_defaults(cls: type) -> dict[str, Any]:
    """Group field name -> its default group (the fields whose default is a dataclass)."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = f.default
        if dataclasses.is_dataclass(default) and not isinstance(default, type):
            out[f.name] = default
    return out


def _split(cls: type, values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict]]:
    """``values`` as (top-level fields, group field -> that group's fields)."""
    top_names = {f.name for f in dataclasses.fields(cls)}
    owners: dict[str, list[str]] = {}
    for group, default in _group_defaults(cls).items():
        for f in dataclasses.fields(default):
            owners.setdefault(f.name, []).append(group)
    top: dict[str, Any] = {}
    groups: dict[str, dict[str, Any]] = {}
    for name, value in values.items():
        if name in top_names or name not in owners:
            top[name] = value  # an unknown name fails in the constructor, named there
        elif len(owners[name]) > 1:
            raise TypeError(f"{cls.__name__}: {name!r} is in more than one group "
                            f"({', '.join(owners[name])})")
        else:
            groups.setdefault(owners[name][0], {})[name] = value
    return top, groups


def setting_names(cls: type) -> set[str]:
    """Every setting of ``cls`` by its own name (what a flat table of it may hold): its fields
    other than its groups, and its groups' fields."""
    groups = _group_defaults(cls)
    names = {f.name for f in dataclasses.fields(cls)} - set(groups)
    for default in groups.values():
        names |= {f.name for f in dataclasses.fields(default)}
    return names


def build(cls: type[T], **values: Any) -> T:
    """``cls(...)`` with each value set where its name is: a field of ``cls``, or of the
    default of one of its groups (the other fields of that group keep their defaults)."""
    top, groups = _split(cls, values)
    defaults = _group_defaults(cls)
    for group, fields in groups.items():
        top[group] = dataclasses.replace(top.get(group, defaults[group]), **fields)
    return cls(**top)


def change(obj: T, **changes: Any) -> T:
    """A copy of the config ``obj`` with each change applied where its name is: a field of
    ``obj``, or of one of its groups (:func:`dataclasses.replace`: validation runs again)."""
    top, groups = _split(type(obj), changes)
    for group, fields in groups.items():
        top[group] = dataclasses.replace(top.get(group, getattr(obj, group)), **fields)
    return dataclasses.replace(obj, **top)  # type: ignore[type-var]
