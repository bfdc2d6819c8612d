"""Old and new code of a few files alternating on one machine, each measured the same way.

Per repetition, for each variant (a git revision of ``files``): check the files out at that
revision, run ``measure`` (a Python snippet run as ``python -c``, in a fresh process so the
checked-out files are the ones imported), which prints one line: the variant's label and its
figures (named by ``columns``). At the end the files are back at ``HEAD``. The working tree's
copies of ``files`` must be committed first (``clean_paths`` are checked): the driver swaps them.

Rows: every figure of every line, with ``rep`` and ``variant``.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from typing import Any

from edgerl.apps.experiments.context import Outcome, RunContext
from edgerl.apps.experiments.execute import Executor
from edgerl.contract.errors import UserError

__all__ = ["Params", "run"]


@dataclass
class Params:
    """The ``[run]`` table of a ``code_ab`` config."""

    files: list[str]
    variants: list[dict[str, str]]            # [{label, rev}], in the order they alternate
    measure: str                              # python -c snippet; {label} and vars filled
    columns: list[str] = field(default_factory=list)  # names of the printed figures
    reps: int = 3
    clean_paths: list[str] = field(default_factory=list)
    vars: dict[str, Any] = field(default_factory=dict)


def _parse(line: str, columns: list[str]) -> dict[str, Any]:
    parts = line.split()
    out: dict[str, Any] = {}
    for name, text in zip(columns, parts[1:]):
        try:
            out[name] = float(text)
        except ValueError:
            out[name] = text
    return out


def run(p: Params, ex: Executor, ctx: RunContext) -> Outcome:
    if not ex.dry_run:
        dirty = subprocess.run(["git", "diff", "--quiet", "--", *(p.clean_paths or p.files)],
                               cwd=ex.root).returncode
        if dirty:
            raise UserError(f"commit or stash {' '.join(p.clean_paths or p.files)} first: "
                            "the driver checks other revisions of them out")
    rows: list[dict[str, Any]] = []
    try:
        for rep in range(1, p.reps + 1):
            for v in p.variants:
                ex.run(["git", "checkout", "-q", v["rev"], "--", *p.files])
                code = p.measure.format(label=v["label"], **p.vars)
                out = ex.run(["python", "-c", code])
                line = (out or "").strip().splitlines()[-1:] if not ex.dry_run else []
                figures = _parse(line[0], p.columns) if line else {}
                rows += [{"rep": rep, "variant": v["label"], "metric": k, "value": val}
                         for k, val in figures.items()]
    finally:
        if not ex.dry_run:
            subprocess.run(["git", "checkout", "-q", "HEAD", "--", *p.files], cwd=ex.root)
    return Outcome(parts={"": rows}, seeds=[])
