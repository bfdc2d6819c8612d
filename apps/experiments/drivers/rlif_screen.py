"""RLIF screens, controls and one-off fits: a declared list of ``edgerl hil`` / ``edgerl
finetune`` runs over seeds, operators, margins (:mod:`edgerl.apps.experiments.templated`).

Besides commands, two in-process steps: ``weaken_region`` (the region-weakened start, skipped
when the bundle is there; its statistics to ``stats_to``) and ``bc_targets`` (how the override
commands in some recordings compare, as BC targets, with the unweakened base). What each step's
``record`` names becomes results rows (operator screens: success, takeovers, steps; margin
screens: success per cell and seed; BC targets: sign agreement, MSE).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from edgerl.apps.experiments.context import Outcome, RunContext
from edgerl.apps.experiments.drivers.rlif_actions import bc_targets, weaken_region
from edgerl.apps.experiments.execute import Executor
from edgerl.apps.experiments.templated import run_steps

__all__ = ["Params", "run"]


@dataclass
class Params:
    """The ``[run]`` table: ``vars`` (names the steps use) and ``steps``."""

    steps: list[dict[str, Any]]
    vars: dict[str, Any] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=lambda: [0])


def _weaken_region(ex: Executor, s: dict[str, Any]) -> dict[str, Any]:
    stats = weaken_region(ex, s["base"], s["out"], s["region"], s["recording"], int(s["seed"]))
    if s.get("stats_to"):
        ex.write_text(s["stats_to"], json.dumps(stats))
    return stats


def _bc_targets(ex: Executor, s: dict[str, Any]) -> dict[str, Any]:
    recs = s["recordings"].split() if isinstance(s["recordings"], str) else s["recordings"]
    return bc_targets(ex, list(recs), s["base"])


def run(p: Params, ex: Executor, ctx: RunContext) -> Outcome:
    rows = run_steps(ex, p.steps, dict(p.vars),
                     {"weaken_region": _weaken_region, "bc_targets": _bc_targets})
    return Outcome(parts={"": rows}, seeds=list(p.seeds))
