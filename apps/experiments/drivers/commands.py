"""A documented command sequence: the CLI verbs an experiment ran, in order, with their loops
(:mod:`edgerl.apps.experiments.templated`). For the experiments whose steps are plain
``edgerl`` commands (grids, gate training and evaluation, the measured-latency retraining):
``record`` tables turn a command's ``--json`` output into results rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgerl.apps.experiments.context import Outcome, RunContext
from edgerl.apps.experiments.execute import Executor
from edgerl.apps.experiments.templated import run_steps

__all__ = ["Params", "run"]


@dataclass
class Params:
    """The ``[run]`` table: ``vars`` and ``steps`` (each a ``command`` template)."""

    steps: list[dict[str, Any]]
    vars: dict[str, Any] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=list)


def run(p: Params, ex: Executor, ctx: RunContext) -> Outcome:
    return Outcome(parts={"": run_steps(ex, p.steps, dict(p.vars))}, seeds=list(p.seeds))
