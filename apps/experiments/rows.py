"""Results rows from what the drivers' tools print: one row per measured number.

A row is ``{context..., "metric": NAME, "value": VALUE}`` (the results store's form). Nested
objects flatten to dotted metric names (``collect.operator_records.override``); lists of
numbers stay one value. The drivers call these on what they measured; the store's migrated
files were converted by the same functions, so old and new runs read alike.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["RLIF_CELLS", "flatten", "gate_run_rows", "reeval_cell", "reeval_rows",
           "rlif_seed_rows"]

#: the evaluated bundles of an RLIF run, as its per-seed result names them
RLIF_CELLS = ("start", "rlif", "bc", "rlif_nonoise", "rlif_beta0", "rlif_own", "rlif_qmax",
              "base")


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def flatten(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted name, value)`` for every leaf of ``obj``; lists of scalars are one leaf."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from flatten(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(obj, list) and all(_scalar(v) for v in obj):
        yield prefix, list(obj)
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from flatten(value, f"{prefix}.{i}" if prefix else str(i))
    else:
        yield prefix, obj


def _rows(context: dict[str, Any], obj: Any, prefix: str) -> list[dict[str, Any]]:
    return [{**context, "metric": name, "value": value} for name, value in flatten(obj, prefix)]


def rlif_seed_rows(res: dict[str, Any], evaluation: str = "in-run") -> list[dict[str, Any]]:
    """Rows of one seed's result of the RLIF chain (single round or rounds)."""
    seed = int(res["seed"])
    out: list[dict[str, Any]] = []
    for key, value in res.items():
        base = {"seed": seed}
        if key == "seed":
            continue
        if key in RLIF_CELLS and isinstance(value, (int, float)):
            out.append({**base, "method": key, "evaluation": evaluation, "metric": "success",
                        "value": value})
        elif key.startswith("rounds_"):
            chain = key[len("rounds_"):]
            for i, entry in enumerate(value):
                ctx = {**base, "chain": chain, "round": int(entry.get("round", i))}
                out += _rows(ctx, {k: v for k, v in entry.items() if k != "round"}, "")
        elif key.startswith("finetune_"):
            out += _rows({**base, "method": key[len("finetune_"):]}, value, "finetune")
        elif key == "weaken_region":
            out += _rows(base, value, "weaken")
        else:
            out += _rows(base, value, key)
    return out


def reeval_cell(name: str) -> str:
    """The cell a re-evaluated bundle folder is (``weak`` -> start, ``rlif/round4/bundle`` ->
    rlif, ``bc`` -> bc, anything else kept)."""
    if name == "weak":
        return "start"
    if name.startswith("rlif/round"):
        return "rlif"
    if name.startswith("rlif_nonoise/round"):
        return "rlif_nonoise"
    return name


def reeval_rows(doc: dict[str, Any], evaluation: str) -> list[dict[str, Any]]:
    """Rows of one re-evaluation (``{"seeds": [{"seed": S, BUNDLE: {success, steps, utc,
    load1}}, ...]}``); each bundle folder's cell named by :func:`reeval_cell`."""
    out: list[dict[str, Any]] = []
    for entry in doc["seeds"]:
        seed = int(entry["seed"])
        for name, result in entry.items():
            if name == "seed":
                continue
            ctx = {"seed": seed, "method": reeval_cell(name), "bundle": name,
                   "evaluation": evaluation}
            out += _rows(ctx, result, "")
    return out


def gate_run_rows(run: dict[str, Any], context: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of one ``edgerl hil`` run of the gate comparison (``context``: batch, seed,
    policy, plant seed offset)."""
    return _rows(context, run, "")
