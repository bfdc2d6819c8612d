"""Helpers every verb uses to print results: JSON for machines, a table for people.

:func:`print_json` and :func:`print_table` live in :mod:`edgerl.contract.report` (below every
layer, so library code prints the same way without importing the CLI); this module re-exports
them for the verbs and adds :func:`print_result`, the ``--json``-or-table choice every verb
makes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from edgerl.contract.report import print_json, print_table

__all__ = ["print_json", "print_result", "print_table"]


def print_result(result: Any, *, as_json: bool, title: str,
                 rows: Sequence[Mapping[str, Any]] | None = None, key: str = "metric") -> None:
    """``result`` as one JSON document when ``as_json`` (a verb's ``--json``), else a table
    titled ``title``: ``rows``, or one ``key`` / ``value`` row per entry of the mapping
    ``result`` (one result reads at any terminal width that way)."""
    if as_json:
        print_json(result)
        return
    if rows is None:
        rows = [{key: k, "value": v} for k, v in result.items()]
    print_table(rows, title=title)
