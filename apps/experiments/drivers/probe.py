"""One measuring program of :mod:`edgerl.apps.experiments.probes`, run with the arguments a doc
quotes (``runs``: several invocations, one after another). What it prints as JSON (one object,
a list of objects, or one object a line) becomes results rows (``run``: the invocation's index;
``item``: the object's index in a list or a line).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from edgerl.apps.experiments.context import Outcome, RunContext
from edgerl.apps.experiments.execute import Executor
from edgerl.apps.experiments.rows import flatten

__all__ = ["Params", "parse_output", "run"]


@dataclass
class Params:
    """The ``[run]`` table of a ``probe`` config."""

    module: str
    args: list[str] = field(default_factory=list)
    runs: list[list[str]] = field(default_factory=list)
    seeds: list[int] = field(default_factory=list)


def parse_output(text: str) -> list[dict[str, Any]]:
    """The JSON objects a probe printed (one, a list, or one a line); [] when it printed none."""
    text = text.strip()
    if not text:
        return []
    try:
        doc = json.loads(text)
        return [d for d in (doc if isinstance(doc, list) else [doc]) if isinstance(d, dict)]
    except json.JSONDecodeError:
        out = []
        for line in text.splitlines():
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
        return out


def run(p: Params, ex: Executor, ctx: RunContext) -> Outcome:
    rows: list[dict[str, Any]] = []
    for i, args in enumerate(p.runs or [p.args]):
        text = ex.run(["python", "-m", f"edgerl.apps.experiments.probes.{p.module}",
                       *map(str, args)])
        text = text if isinstance(text, str) else ""
        objects = parse_output(text)
        for j, obj in enumerate(objects):
            rows += [{"run": i, "item": j, "metric": m, "value": v} for m, v in flatten(obj)]
        if not objects and text.strip() and not ex.dry_run:
            rows.append({"run": i, "metric": "stdout", "value": text})
    return Outcome(parts={"": rows}, seeds=list(p.seeds))
