"""Markdown tables: written from rows, and a hand-written table kept as rows.

A hand-written table of an experiment's notes is stored as results rows, one per cell:
``{"table": ID, "row": R, "col": C, "metric": HEADER, "value": V}`` (row 0 is the header, its
cells' metric is ``"header"``); ``value`` is the number when the cell is one (``**0.55**`` ->
0.55), else the cell's text; ``text`` keeps the cell as written where ``value`` alone would not
give it back. :func:`parse_tables` takes the tables out of a text (leaving ``{{table:ID}}`` in
their place), :func:`render_cells` writes one back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["md_table", "parse_tables", "render_cells"]

_SPLIT = re.compile(r"(?<!\\)\|")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def _escape(cell: Any) -> str:
    """A cell's text with its bare ``|`` escaped (``mean |du|`` would split the column)."""
    return _SPLIT.sub(r"\|", str(cell))


def md_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A markdown table's lines (a ``|`` inside a cell is escaped)."""
    out = [("| " + " | ".join(map(_escape, header)) + " |").replace("|  |", "| |"),
           "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in rows]
    return out


def _cells(line: str) -> list[str]:
    parts = _SPLIT.split(line.strip())
    return [p.strip() for p in parts[1:-1]]


def _value(text: str) -> Any:
    bare = text.replace("**", "").strip()
    if _NUMBER.match(bare):
        number = float(bare)
        return int(number) if re.match(r"^[+-]?\d+$", bare) else number
    return text


def _cell_row(table: str, r: int, c: int, metric: str, text: str) -> dict[str, Any]:
    value = _value(text) if r else text
    row = {"table": table, "row": r, "col": c, "metric": "header" if r == 0 else metric,
           "value": value}
    if str(value) != text:
        row["text"] = text
    return row


def parse_tables(text: str, prefix: str = "t") -> tuple[str, list[list[dict[str, Any]]]]:
    """``text`` with each markdown table replaced by ``{{table:ID}}``, and each table's cell
    rows (IDs ``t1``, ``t2``, ... in order)."""
    lines = text.split("\n")
    out: list[str] = []
    tables: list[list[dict[str, Any]]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.startswith("|") and re.match(r"^\|[-:| ]+\|\s*$", nxt):
            block = [line]
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                block.append(lines[j])
                j += 1
            table = f"{prefix}{len(tables) + 1}"
            header = _cells(block[0])
            cells = [_cell_row(table, 0, c, "header", h) for c, h in enumerate(header)]
            for r, row_line in enumerate(block[1:], start=1):
                cells += [_cell_row(table, r, c, header[c] if c < len(header) else f"col{c}",
                                    text) for c, text in enumerate(_cells(row_line))]
            tables.append(cells)
            out.append("{{table:" + table + "}}")
            i = j
            continue
        out.append(line)
        i += 1
    return "\n".join(out), tables


def render_cells(cells: Iterable[dict[str, Any]]) -> list[str]:
    """One stored table back as markdown lines."""
    grid: dict[int, dict[int, str]] = {}
    for cell in cells:
        text = cell.get("text", cell["value"])
        grid.setdefault(int(cell["row"]), {})[int(cell["col"])] = str(text)
    header = [grid[0][c] for c in sorted(grid[0])]
    rows = [[grid[r].get(c, "") for c in sorted(grid[r])] for r in sorted(grid) if r]
    return md_table(header, rows)
