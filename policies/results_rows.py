"""The results grid's rows in the results store (:mod:`edgerl.contract.results_store`).

The grid works on *cells*: one dict per (task, delay, method, seed) with its numbers
(``success_rate``, ``return_mean``, ...). The store keeps one row per number:
``{task, delay_steps, delay_ms, method, seed, metric, value}``; a cell added by a later
``edgerl results`` run carries that run's provenance (command, commit, date, machine) on each of
its rows, so a grid filled over several runs says which run made which cell.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgerl.contract.results_store import Provenance, read_results, write_results

__all__ = ["CELL_KEYS", "PROVENANCE_KEY", "cells_from_rows", "load_rows", "rows_from_cells",
           "save_rows"]

#: what identifies a cell; every other key of a cell is one of its numbers
CELL_KEYS = ("task", "delay_steps", "delay_ms", "method", "seed")
#: a cell's provenance while the grid holds it (written onto each of its rows)
PROVENANCE_KEY = "_provenance"
EXPERIMENT, QUESTION = "planner-matters-grid", "planner-matters"


def rows_from_cells(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Store rows of grid cells, sorted by (task, delay, method, seed)."""
    rows = []
    for cell in sorted(cells, key=lambda c: (c["task"], c["delay_steps"], c["method"],
                                             c["seed"])):
        context = {k: cell[k] for k in CELL_KEYS}
        prov = cell.get(PROVENANCE_KEY)
        for key, value in cell.items():
            if key in CELL_KEYS or key == PROVENANCE_KEY:
                continue
            row = {**context, "metric": key, "value": value}
            if prov is not None:
                row["provenance"] = prov
            rows.append(row)
    return rows


def cells_from_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Grid cells from store rows (the inverse of :func:`rows_from_cells`)."""
    cells: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        key = tuple(row[k] for k in CELL_KEYS)
        cell = cells.setdefault(key, dict(zip(CELL_KEYS, key)))
        cell[row["metric"]] = row["value"]
        if "provenance" in row:
            cell[PROVENANCE_KEY] = row["provenance"]
    return list(cells.values())


def load_rows(path: str | Path) -> list[dict[str, Any]]:
    """The grid cells of a results file ([] when it does not exist; a file that is not a
    results file of the store's schema is refused, naming the file and the field)."""
    path = Path(path)
    if not path.is_file():
        return []
    return cells_from_rows(read_results(path).rows)


def save_rows(path: str | Path, cells: list[dict[str, Any]], *,
              config: dict[str, Any] | None = None, provenance: Provenance | None = None,
              experiment: str = EXPERIMENT, question: str = QUESTION) -> None:
    """Write grid cells as a results file (provenance of this process unless given)."""
    write_results(path, experiment=experiment, question=question, config=config or {},
                  seeds=[c["seed"] for c in cells], rows=rows_from_cells(cells),
                  provenance=provenance)
