"""The new-task protocol on one task (``edgerl protocol``): every control, several seeds.

The config's ``[run]`` table holds the protocol's settings; the driver runs
``edgerl protocol TASK ... --out DIR --json`` and stores one row per cell, seed and metric
(:func:`edgerl.policies.protocol.store_rows`), each with the provenance of the run that made
it. Rerunning with the same settings and ``out`` reuses the finished cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgerl.apps.experiments.context import Outcome, RunContext
from edgerl.apps.experiments.execute import Executor

__all__ = ["Params", "command", "run"]


@dataclass
class Params:
    """The ``[run]`` table: :class:`~edgerl.policies.protocol.ProtocolConfig`'s settings."""

    task: str
    out: str
    planner_only: list[Any] = field(default_factory=list)
    delay_ms: float = 200.0
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    iterations: int = 300
    expert_iterations: int = 0
    num_envs: int = 32
    episodes: int = 50
    planner: str = "bc"
    metric: str = "return_mean"
    extra_cells: list[str] = field(default_factory=list)
    jobs: int = 2


def command(p: Params) -> list[str]:
    """The ``edgerl protocol`` command line of ``p``."""
    argv = ["edgerl", "protocol", p.task, "--delay-ms", f"{p.delay_ms:g}",
            "--seeds", ",".join(str(s) for s in p.seeds), "--iterations", str(p.iterations),
            "--num-envs", str(p.num_envs), "--episodes", str(p.episodes),
            "--planner", p.planner, "--metric", p.metric, "--jobs", str(p.jobs)]
    if p.planner_only:
        argv += ["--planner-only", ",".join(str(x) for x in p.planner_only)]
    if p.expert_iterations:
        argv += ["--expert-iterations", str(p.expert_iterations)]
    if p.extra_cells:
        argv += ["--extra-cells", ",".join(p.extra_cells)]
    return [*argv, "--out", p.out, "--json"]


def run(p: Params, ex: Executor, ctx: RunContext) -> Outcome:
    from edgerl.policies.protocol import ProtocolConfig, store_rows

    ex.run(command(p), json_out=True)
    if ex.dry_run:
        return Outcome(parts={"": []}, seeds=list(p.seeds))
    doc = ex.read_json(f"{p.out}/protocol.json")
    cfg = doc["config"]
    cfg = ProtocolConfig(**{**cfg, "seeds": tuple(cfg["seeds"]),
                            "extra_cells": tuple(cfg["extra_cells"])})
    return Outcome(parts={"": store_rows(cfg, doc["rows"])}, seeds=list(p.seeds))
