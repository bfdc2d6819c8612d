"""Re-evaluate the bundles of an RLIF chain one after another, nothing else of the experiment
running: ``edgerl hil`` at normal priority, the UTC time and the load average beside each.

The chain evaluates while other seeds collect or fine-tune, and a real-time HIL evaluation on
a loaded 2-core machine reads lower (the same start scored 0.35 alone and 0.05 beside two other
seeds), so the declared numbers are these re-evaluations. As a driver of its own it re-evaluates
a finished run, e.g. on plant seeds no earlier step saw (``eval_seed_offset``).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import dataclass, field, fields
from typing import Any

from edgerl.apps.experiments.context import Outcome, RunContext
from edgerl.apps.experiments.drivers.rlif_actions import hil_args
from edgerl.apps.experiments.execute import Executor
from edgerl.apps.experiments.rows import reeval_rows

__all__ = ["Params", "ReevalSpec", "reevaluate", "run"]


@dataclass
class ReevalSpec:
    """One re-evaluation pass over the seeds."""

    out: str
    base: str
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    episodes: int = 20
    latency_ms: float = 100.0
    eval_seed_offset: int = 1000
    rounds_too: bool = False
    only: list[str] = field(default_factory=list)
    json_out: str = ""
    last_round: int | None = None


def cells(ex: Executor, spec: ReevalSpec, seed: int) -> dict[str, str]:
    """The bundles of one seed: start, RLIF (last round), BC, RLIF without noise, base (and
    with ``rounds_too`` the earlier rounds' RLIF bundles); ``only``: just these folders."""
    d = f"{spec.out}/seed{seed}"
    if spec.only:
        return {name: f"{d}/{name}" for name in spec.only}
    last = spec.last_round
    if last is None:
        found = [int(p.name[5:]) for p in ex.path(f"{d}/rlif").glob("round*")]
        last = max(found) if found else 0
    out = {"start": f"{d}/weak", "rlif": f"{d}/rlif/round{last}/bundle", "bc": f"{d}/bc",
           "rlif_nonoise": f"{d}/rlif_nonoise/round{last}/bundle", "base": spec.base}
    if spec.rounds_too:
        for r in range(last):
            out[f"rlif_round{r + 1}"] = f"{d}/rlif/round{r}/bundle"
            out[f"rlif_nonoise_round{r + 1}"] = f"{d}/rlif_nonoise/round{r}/bundle"
    return out


def evaluate(ex: Executor, bundle: str, episodes: int, seed: int,
             latency_ms: float) -> dict[str, Any]:
    """One ``edgerl hil`` evaluation (one retry if it fails to start), with the UTC time and
    the 1-minute load average when it started."""
    t = time.strftime("%H:%M:%S", time.gmtime())
    load = os.getloadavg()[0]
    res = ex.run([*hil_args(bundle, episodes, seed, latency_ms), "--json"], json_out=True,
                 retries=1)
    return {"success": res["success"], "steps": res["steps"], "utc": t, "load1": round(load, 2)}


def reevaluate(ex: Executor, spec: ReevalSpec) -> dict[str, Any]:
    """Every cell of every seed, one after another; the document (also to ``json_out``)."""
    rows: list[dict[str, Any]] = []
    for seed in spec.seeds:
        row: dict[str, Any] = {"seed": seed}
        for name, bundle in cells(ex, spec, seed).items():
            row[name] = evaluate(ex, bundle, spec.episodes, spec.eval_seed_offset + seed,
                                 spec.latency_ms)
        rows.append(row)
    names = [k for k in rows[0] if k != "seed"] if rows else []
    summary = {k: {"mean": statistics.mean(r[k]["success"] for r in rows),
                   "std": statistics.pstdev(r[k]["success"] for r in rows)} for k in names}
    doc = {"config": {k: v for k, v in spec.__dict__.items()}, "seeds": rows,
           "summary": summary}
    if spec.json_out:
        ex.write_text(spec.json_out, json.dumps(doc, indent=1))
    return doc


@dataclass
class Params(ReevalSpec):
    """The ``[run]`` table of an ``rlif_reeval`` config: a :class:`ReevalSpec` and the rows'
    ``label``."""

    label: str = "reeval"


def run(p: Params, ex: Executor, ctx: RunContext) -> Outcome:
    spec = ReevalSpec(**{f.name: getattr(p, f.name) for f in fields(ReevalSpec)})
    return Outcome(parts={"": reeval_rows(reevaluate(ex, spec), p.label)}, seeds=p.seeds)
