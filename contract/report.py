"""Printing results: strict JSON for machines, a table for people.

Below every layer so library entry points (``edgerl.bench.sim.mujoco_backends``, the demo) print
like the CLI does without importing it; ``edgerl.apps.cli.output`` re-exports these.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["finite", "print_json", "print_table"]


def print_json(obj: Any) -> None:
    """Strict JSON on stdout (NaN/inf become null), one document, newline-terminated."""
    sys.stdout.write(json.dumps(finite(obj), indent=2) + "\n")
    sys.stdout.flush()


def finite(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN, +-inf), at any depth, replaced by ``None``."""
    if isinstance(obj, float):
        return obj if obj == obj and abs(obj) != float("inf") else None
    if isinstance(obj, Mapping):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def _line(text: str) -> None:
    sys.stdout.write(text + "\n")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def print_table(rows: Sequence[Mapping[str, Any]], title: str = "",
                columns: Sequence[str] | None = None) -> None:
    """A table on stdout (rich when installed, aligned plain text otherwise)."""
    if not rows:
        _line(f"{title}: (none)" if title else "(none)")
        return
    columns = list(columns or rows[0].keys())
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(c), *(len(_fmt(r.get(c, ""))) for r in rows)) for c in columns]
        if title:
            _line(title)
        _line("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
        for r in rows:
            _line("  ".join(_fmt(r.get(c, "")).ljust(w) for c, w in zip(columns, widths)))
        return
    table = Table(title=title or None)
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*(_fmt(r.get(c, "")) for c in columns))
    Console(width=max(100, Console().width)).print(table)
