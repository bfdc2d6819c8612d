"""The planning-budget gate against the tuned heuristic through the HIL runtime, in paired
batches.

Per batch (plant seeds ``offset + S``) and gate seed ``S``: ``edgerl hil`` on the gate's bundle
(``bundles`` with ``{S}``) under each ``--gate-policy`` in ``policies``, all of one seed at the
same time (the same load for both sides), ``episodes`` episodes with the scenario's disturbance
(``--kicks``) reseeded per episode, so episode ``k`` of one policy meets the same plant and
kicks as episode ``k`` of the other. Each run's JSON is kept in ``OUT/S_POLICY.json`` (with its
wall time, end time and load) and reused when present, so a stopped batch resumes.

Rows: every number of every run, with ``batch``, ``seed``, ``policy``. The docs read them as
the paired difference of net return (return minus planning price) per seed, pooled over
episodes (the declared rule) and across the gate seeds (:mod:`edgerl.apps.experiments.
gate_analysis`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from edgerl.apps.experiments.context import Outcome, RunContext
from edgerl.apps.experiments.execute import Executor, StepFailed
from edgerl.apps.experiments.gate_analysis import paired_reading, runs_from_rows
from edgerl.apps.experiments.rows import gate_run_rows

__all__ = ["Params", "run"]


@dataclass
class Params:
    """The ``[run]`` table of a ``gate_paired`` config."""

    bundles: str                                  # with {S}: the gate seed's bundle
    batches: list[dict[str, Any]]                 # [{name, offset, out}]
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    policies: list[str] = field(default_factory=lambda: ["gate:sample", "age:fast:12"])
    episodes: int = 32
    kicks: str = "rate=0.004,size=0.8,steps=6,dims=1"
    action_noise: float = 0.0
    extra: list[str] = field(default_factory=list)  # more `edgerl hil` flags
    readings: dict[str, list[str]] = field(default_factory=dict)  # name -> batches pooled


def hil_argv(p: Params, seed: int, policy: str, offset: int) -> list[str]:
    """One paired run's command (the order of its flags is the one it always had)."""
    argv = ["edgerl", "hil", "--bundle", p.bundles.format(S=seed), "--episodes",
            str(p.episodes), "--seed", str(seed + offset), "--gate-policy", policy,
            "--link-probe", "0", "--no-estop-check", "--action-noise", str(p.action_noise),
            *p.extra, "--json"]
    return argv + (["--kicks", p.kicks] if p.kicks else [])


def _stamp(out: dict[str, Any], t0: float) -> dict[str, Any]:
    import os

    out["wall_s"] = round(time.time() - t0, 1)
    out["utc_end"] = time.strftime("%H:%M:%S", time.gmtime())
    out["load_end"] = f"{os.getloadavg()[0]:.2f}"
    return out


def run_batch(ex: Executor, p: Params, name: str, offset: int,
              out: str) -> dict[tuple[int, str], dict[str, Any]]:
    """One batch: per gate seed, every policy at once; (seed, policy) -> the run's JSON."""
    runs: dict[tuple[int, str], dict[str, Any]] = {}
    for s in p.seeds:
        started = []
        for pol in p.policies:
            path = f"{out}/{s}_{pol.replace(':', '_')}.json"
            if ex.exists(path):
                runs[(s, pol)] = ex.read_json(path)
                continue
            started.append((pol, path, time.time(),
                            ex.start(hil_argv(p, s, pol, offset), capture=True)))
        for pol, path, t0, handle in started:
            code, text = ex.wait(handle)
            if code:  # one retry: a HIL start can time out on a loaded machine
                text = ex.run(hil_argv(p, s, pol, offset))
            try:
                result = _stamp(json.loads(text), t0)
            except json.JSONDecodeError as exc:
                raise StepFailed(f"batch {name}, seed {s}, {pol}: no JSON") from exc
            ex.write_text(path, json.dumps(result))
            runs[(s, pol)] = result
    return runs


def run(p: Params, ex: Executor, ctx: RunContext) -> Outcome:
    rows: list[dict[str, Any]] = []
    for batch in p.batches:
        name, offset, out = str(batch["name"]), int(batch["offset"]), str(batch["out"])
        runs = run_batch(ex, p, name, offset, out)
        for (s, pol), result in runs.items():
            rows += gate_run_rows(result, {"batch": name, "seed": s, "policy": pol,
                                           "plant_seed_offset": offset})
    if len(p.policies) >= 2:
        table = runs_from_rows(rows)
        for label, batches in ({"all": [str(b["name"]) for b in p.batches]} | p.readings).items():
            r = paired_reading(table, batches, p.seeds, p.policies[0], p.policies[1])
            ex.note(f"{label}: {p.policies[0]} minus {p.policies[1]}, pooled over episodes "
                    f"{r.pooled.text(2, True)}; across gate seeds {r.seed_level.diff.text(2, True)}"
                    f", {r.seed_level.verdict()}")
    return Outcome(parts={"": rows}, seeds=list(p.seeds))
