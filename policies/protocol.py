"""The new-task protocol: does the slow planner matter on a task, with every control, per seed.

For one registered task (edgerl's own, ``gym:``, ``dmc:``, ``mjlab:``...) with a declared split
(the observation elements only the planner sees), a planner delay and several seeds, it trains
and evaluates, with one configuration for every method (:class:`ProtocolConfig`):

==================  ===============================================================  =======
cell                what                                                              budget
==================  ===============================================================  =======
``nodelay``         privileged upper bound: reads every observation, no delay; on a      ``B_e``
                    foreign task it is also the expert the planner learns from
``edit``            BC planner chunks (and intent) D steps late + the edit policy        ``B``
``edit_zero_chunks``the same network and budget, every chunk zero (best of with and      ``B``
                    without the warm start: the stronger control)
``planner``         the same BC planner's chunks, open loop, D steps late                 --
``planner@0``       the same planner's chunks without delay (what the chunks carry)       --
==================  ===============================================================  =======

``B`` counts the edit's warm-start samples with its PPO steps; ``B_e >= B``. Each cell is
evaluated on episodes of seeds no training run saw. The summary per seed gives the normalized
planner gain ``g = (edit - zero) / (nodelay - zero)`` (1: the edit recovers everything the
delay cost; 0: the planner adds nothing) and ``edit - planner``, and their mean and standard
error over seeds (the trained unit); beside every score the command's mean |du| per tick.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CELLS", "EXTRA_CELLS", "QUESTION", "ProtocolCell", "ProtocolConfig", "cell_config",
           "has_headroom", "protocol_cells", "record", "rows_from_store", "run_cell",
           "run_protocol", "store_rows", "summarize"]

log = logging.getLogger(__name__)

#: The cells of one seed, in the order they run (the expert first: the others learn from it).
CELLS = ("nodelay", "edit", "edit_zero_chunks", "edit_zero_chunks_cold", "planner",
         "planner@0")
#: Cells a protocol may add (``extra_cells``): the chunk-merging baselines and the edit over a
#: planner that reads the committed prefix (training-time real-time chunking).
EXTRA_CELLS = ("rtc", "blend", "edit_prefix")


@dataclass(frozen=True)
class ProtocolConfig:
    """One protocol run: the task, its split, the delay, the seeds and the shared budget.

    Attributes:
        task: A registered task name.
        planner_only: The split, as the task factory's ``planner_only`` argument (element
            names, indices or observation keys); empty = the task's own declared split.
        delay_ms: Planner delay (rounded up to whole control steps).
        seeds: Training seeds; evaluation uses seed + 1000.
        iterations: PPO iterations of the edit policies (each ``num_envs`` x
            ``steps_per_env`` env steps).
        expert_iterations: PPO iterations of the privileged ``nodelay`` cell (>= the edit's
            budget; 0 = ``iterations`` plus the warm start's share).
        num_envs: Parallel envs of every training run.
        steps_per_env: Rollout length per PPO iteration.
        episodes: Evaluation episodes per cell.
        planner: ``bc`` (the planner learns from the expert's demonstrations) or ``expert``
            (the task's scripted expert plans; only tasks with one).
        expert_run: An existing ``nodelay`` run to use as the expert (skips that cell's
            training; it is still evaluated as the upper bound).
        train: Extra :class:`~edgerl.policies.config.TrainConfig` fields for every learned
            cell (the one configuration; e.g. ``{"intent_dim": 8}``).
        task_kwargs: Extra task factory arguments.
        jobs: Cells trained at once (processes).
        extra_cells: Cells beyond :data:`CELLS`, out of :data:`EXTRA_CELLS`.
    """

    task: str
    planner_only: list[Any] = field(default_factory=list)
    delay_ms: float = 200.0
    seeds: tuple[int, ...] = (0, 1, 2)
    iterations: int = 300
    expert_iterations: int = 0
    num_envs: int = 32
    steps_per_env: int = 32
    episodes: int = 50
    planner: str = "bc"
    expert_run: str = ""
    train: dict[str, Any] = field(default_factory=dict)
    task_kwargs: dict[str, Any] = field(default_factory=dict)
    jobs: int = 1
    extra_cells: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = [c for c in self.extra_cells if c not in EXTRA_CELLS]
        if unknown:
            raise ValueError(f"unknown extra cells {unknown}; choose from "
                             f"{', '.join(EXTRA_CELLS)}")
        if self.delay_ms < 0 or self.iterations < 1 or self.episodes < 1 or self.jobs < 1:
            raise ValueError("delay_ms must be >= 0, iterations, episodes and jobs >= 1")
        if not self.seeds:
            raise ValueError("the protocol needs at least one seed")
        if self.planner not in ("bc", "expert"):
            raise ValueError(f"planner must be 'bc' or 'expert', got {self.planner!r}")


@dataclass(frozen=True)
class ProtocolCell:
    """One training (or baseline set-up) and its evaluation."""

    name: str
    seed: int

    @property
    def method(self) -> str:
        return {"edit_zero_chunks_cold": "edit_zero_chunks", "planner@0": "planner",
                "edit_prefix": "edit"}.get(self.name, self.name)

    def run_dir(self, root: Path) -> Path:
        return root / f"{self.name.replace('@', '_d')}__s{self.seed}"


def protocol_cells(cfg: ProtocolConfig) -> list[ProtocolCell]:
    """Every cell, seed by seed (experts first; see :data:`CELLS`), then the extra cells."""
    names = (*CELLS, *cfg.extra_cells)
    return [ProtocolCell(name, seed) for seed in cfg.seeds for name in names]


def needs_expert_run(task: str) -> bool:
    """Whether ``task`` comes from a task family without a scripted expert (``gym:``,
    ``dmc:``, ``mjlab:``, ...): its planner learns from the protocol's own ``nodelay`` run."""
    return ":" in task


def delay_steps(cfg: ProtocolConfig, control_hz: float) -> int:
    """``delay_ms`` in whole control steps, rounded up."""
    return math.ceil(cfg.delay_ms / 1000.0 * control_hz - 1e-9)


def cell_config(cfg: ProtocolConfig, cell: ProtocolCell, control_hz: float,
                expert_run: str | None) -> Any:
    """The :class:`~edgerl.policies.config.TrainConfig` of ``cell``."""
    from dataclasses import replace

    from edgerl.policies.config import TrainConfig

    kwargs = dict(cfg.task_kwargs)
    if cfg.planner_only:
        kwargs["planner_only"] = list(cfg.planner_only)
    if expert_run and cell.name != "nodelay":
        kwargs["expert_run"] = expert_run
    d = delay_steps(cfg, control_hz)
    common = {"task": cfg.task, "seed": cell.seed, "num_envs": cfg.num_envs,
              "num_steps_per_env": cfg.steps_per_env, "task_kwargs": kwargs}
    if cell.name == "nodelay":
        iters = cfg.expert_iterations or cfg.iterations + _warm_iterations(cfg)
        return TrainConfig(method="nodelay", privileged=True, iterations=iters, **common)
    train = dict(cfg.train)
    sections = [k for k, v in train.items() if isinstance(v, dict)]  # nested dataclasses
    base = TrainConfig(method=cell.method, planner=cfg.planner, iterations=cfg.iterations,
                       delay_steps=0 if cell.name == "planner@0" else d, **common,
                       **{k: v for k, v in train.items() if k not in sections})
    nested = {k: replace(getattr(base, k), **train[k]) for k in sections}
    if cell.name == "edit_zero_chunks_cold":
        nested["distill"] = replace(nested.get("distill", base.distill), rounds=0)
    if cell.name == "edit_prefix":
        nested["planner_prefix"] = True
    return replace(base, **nested) if nested else base


def _warm_iterations(cfg: ProtocolConfig) -> int:
    """The edit's warm-start samples in PPO iterations (rounded up), so the expert's budget
    covers them."""
    distill = cfg.train.get("distill", {})
    samples = int(distill.get("rounds", 0)) * int(distill.get("steps", 64)) * cfg.num_envs
    return math.ceil(samples / (cfg.num_envs * cfg.steps_per_env))


#: The repository the running code came from (its git revision goes into each row).
CODE_ROOT = Path(__file__).resolve().parents[1]


def cell_provenance(command: str) -> dict[str, Any]:
    """Where a cell's row came from: the protocol's command line, the git revision of the
    code that ran it, the time and the machine (load average now)."""
    from edgerl.contract.results_store import Provenance, git_commit, utc_now

    prov = Provenance(command=command, commit=git_commit(CODE_ROOT), date=utc_now(),
                      machine={"cpu_count": __import__("os").cpu_count(), "load_average": []})
    prov.sample_load()
    return prov.to_dict()


def run_cell(cfg: ProtocolConfig, cell: ProtocolCell, root: Path, control_hz: float,
             expert_run: str | None, command: str = "") -> dict[str, Any]:
    """Train (or set up) and evaluate one cell; its row (with its ``provenance``)."""
    import shutil

    import torch

    from edgerl.policies.evaluate import evaluate_run
    from edgerl.policies.train import train

    torch.set_num_threads(1)
    out = cell.run_dir(root)
    if cell.name == "nodelay" and cfg.expert_run:
        out, wall, env_steps, distill_samples = Path(cfg.expert_run), 0.0, 0, 0
    else:
        if out.exists():
            shutil.rmtree(out)
        tc = cell_config(cfg, cell, control_hz, expert_run)
        res = train(tc, out=out, show_progress=False)
        wall, env_steps = res.wall_s, res.env_steps
        distill_samples = 0
        if tc.is_edit and tc.distill.rounds:
            distill_samples = tc.distill.rounds * tc.distill.steps * tc.num_envs
    ev = evaluate_run(str(out), cfg.episodes, seed=cell.seed + 1000, show_progress=False)
    return {"cell": cell.name, "method": cell.method, "seed": cell.seed,
            "return_mean": ev["return_mean"], "return_std": ev["return_std"],
            "success_rate": ev["success_rate"], "action_rate": ev["action_rate"],
            "episodes": ev["episodes"], "delay_ms": ev["delay_ms"],
            "delay_steps": ev["delay_steps"], "budget_env_steps": env_steps + distill_samples,
            "train_wall_s": round(wall, 2), "run": str(out),
            "provenance": cell_provenance(command)}


#: The rows finished so far, one JSON line each, under the protocol's root (a rerun with the
#: same configuration skips them).
ROWS_NAME = "rows.jsonl"


#: Protocol fields a cell's row does not depend on: how many cells train at once, which
#: seeds and extra cells the protocol runs (each cell has its own seed).
NOT_IN_CELL_KEY = ("jobs", "seeds", "extra_cells")


def cell_key(cfg: ProtocolConfig) -> str:
    """What a finished row must have been made with to be reused: the configuration without
    :data:`NOT_IN_CELL_KEY` (so adding extra cells or seeds reruns nothing already done)."""
    return json.dumps({k: v for k, v in asdict(cfg).items() if k not in NOT_IN_CELL_KEY},
                      sort_keys=True)


def finished_rows(cfg: ProtocolConfig, root: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """``(cell, seed) -> row`` of the cells already done under ``root`` with this
    configuration (:func:`cell_key`; a row of another configuration is not reused)."""
    path = root / ROWS_NAME
    if not path.is_file():
        return {}
    keys = {cell_key(cfg), json.dumps(asdict(cfg), sort_keys=True)}  # the older, whole key
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return {(r["cell"], r["seed"]): r for r in rows if r.get("config") in keys}


def run_protocol(cfg: ProtocolConfig, root: str | Path,
                 on_row: Callable[[dict[str, Any]], None] | None = None,
                 command: str = "") -> list[dict[str, Any]]:
    """Run every cell of ``cfg`` under ``root`` (``cfg.jobs`` at once); the rows. Cells that a
    previous run of the same configuration finished there are not run again (their rows keep
    the provenance of the run that made them). ``command``: the command line for the rows'
    provenance."""
    from edgerl.sim.registry import get_task_info

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    hz = float(get_task_info(cfg.task).control_hz)
    before = finished_rows(cfg, root)
    me = cell_key(cfg)
    rows: list[dict[str, Any]] = []

    def done(row: dict[str, Any], fresh: bool = True) -> None:
        rows.append(row)
        if fresh:
            with open(root / ROWS_NAME, "a") as fh:
                fh.write(json.dumps({**row, "config": me}) + "\n")
        if on_row is not None:
            on_row(row)

    cells = protocol_cells(cfg)
    experts = [c for c in cells if c.name == "nodelay"]
    rest = [c for c in cells if c.name != "nodelay"]
    expert_of: dict[int, str | None] = {}
    with ProcessPoolExecutor(max_workers=cfg.jobs) as pool:
        for group in (experts, rest):
            todo = [c for c in group if (c.name, c.seed) not in before]
            futures = {c: pool.submit(run_cell, cfg, c, root, hz, expert_of.get(c.seed),
                                      command)
                       for c in todo}
            for c in group:
                row = before.get((c.name, c.seed))
                if row is None:
                    row = futures[c].result()
                    done(row)
                else:
                    done({k: v for k, v in row.items() if k != "config"}, fresh=False)
                if c.name == "nodelay":
                    expert_of[c.seed] = row["run"] if needs_expert_run(cfg.task) else None
    return rows


# --- the summary ---------------------------------------------------------------------------
def _mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error (sample std / sqrt(n); 0 for one value)."""
    vals = [v for v in values if v == v]
    if not vals:
        return float("nan"), float("nan")
    mean = statistics.fmean(vals)
    se = statistics.stdev(vals) / math.sqrt(len(vals)) if len(vals) > 1 else 0.0
    return mean, se


def summarize(rows: list[dict[str, Any]], metric: str = "return_mean") -> dict[str, Any]:
    """Per cell: mean +- SE over seeds of ``metric`` and of the action rate; per seed the
    planner gain ``g`` (the control is the better ``edit_zero_chunks`` of the two),
    ``edit - planner`` and the ``headroom`` ``nodelay - zero`` (g means something only where
    the privileged policy beats the zero-chunk control), with their mean +- SE over seeds."""
    by = {(r["cell"], r["seed"]): r for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    cells: dict[str, Any] = {}
    for name in (*CELLS, *EXTRA_CELLS):
        vals = [by[(name, s)][metric] for s in seeds if (name, s) in by]
        rates = [by[(name, s)]["action_rate"] for s in seeds if (name, s) in by]
        budgets = [by[(name, s)].get("budget_env_steps", 0) for s in seeds if (name, s) in by]
        if vals:
            m, se = _mean_se(vals)
            rm, rse = _mean_se(rates)
            cells[name] = {"mean": m, "se": se, "n": len(vals), "action_rate": rm,
                           "action_rate_se": rse, "per_seed": vals,
                           "budget_env_steps": max(budgets)}
    gains, margins, zeros, rooms = [], [], [], []
    for s in seeds:
        need = [(n, s) in by for n in ("nodelay", "edit", "planner")]
        zero_cells = [by[(n, s)][metric] for n in ("edit_zero_chunks", "edit_zero_chunks_cold")
                      if (n, s) in by]
        if not all(need) or not zero_cells:
            continue
        zero = max(zero_cells)
        zeros.append(zero)
        edit, top = by[("edit", s)][metric], by[("nodelay", s)][metric]
        gains.append((edit - zero) / (top - zero) if top != zero else float("nan"))
        margins.append(edit - by[("planner", s)][metric])
        rooms.append(top - zero)
    g, g_se = _mean_se(gains)
    m, m_se = _mean_se(margins)
    z, z_se = _mean_se(zeros)
    h, h_se = _mean_se(rooms)
    return {"metric": metric, "cells": cells, "seeds": seeds,
            "zero_control": {"mean": z, "se": z_se, "per_seed": zeros},
            "g": {"mean": g, "se": g_se, "per_seed": gains},
            "edit_minus_planner": {"mean": m, "se": m_se, "per_seed": margins},
            "headroom": {"mean": h, "se": h_se, "per_seed": rooms}}


def has_headroom(summary: dict[str, Any]) -> bool:
    """Whether the privileged policy beats the zero-chunk control by more than 2 SE over the
    seeds (:func:`summarize`'s ``headroom``): only then is ``g``'s denominator not noise."""
    room = summary.get("headroom", {})
    return bool(room) and room["mean"] > 2 * room["se"]


#: The question the protocol's results answer in the results store.
QUESTION = "planner-gain"
#: Per-row metrics recorded in the store.
ROW_METRICS = ("return_mean", "return_std", "success_rate", "action_rate", "episodes",
               "budget_env_steps", "delay_steps", "delay_ms", "train_wall_s")


def store_rows(cfg: ProtocolConfig, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The protocol's rows as results rows: one per cell, seed and metric, each with its
    cell's provenance."""
    out = []
    for r in sorted(rows, key=lambda r: (r["seed"], r["cell"])):
        context = {"task": cfg.task, "cell": r["cell"], "method": r["method"],
                   "seed": r["seed"]}
        for metric in ROW_METRICS:
            if metric in r:
                row = {**context, "metric": metric, "value": r[metric]}
                if "provenance" in r:
                    row["provenance"] = r["provenance"]
                out.append(row)
    return out


def record(store: str | Path, experiment: str, cfg: ProtocolConfig,
           rows: list[dict[str, Any]]) -> Path:
    """Write the protocol's rows as the results file of ``experiment`` in the results store
    ``store`` (``experiments/``), question :data:`QUESTION`; its path."""
    from edgerl.contract.results_store import write_results

    path = Path(store) / QUESTION / "results" / f"{experiment}.json"
    write_results(path, experiment=experiment, question=QUESTION, config=asdict(cfg),
                  seeds=cfg.seeds, rows=store_rows(cfg, rows))
    return path


def rows_from_store(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`store_rows`' inverse: one row per cell and seed, as :func:`summarize` reads."""
    by: dict[tuple[str, int], dict[str, Any]] = {}
    for r in rows:
        key = (r["cell"], int(r["seed"]))
        by.setdefault(key, {"cell": r["cell"], "method": r["method"], "seed": int(r["seed"])})
        by[key][r["metric"]] = r["value"]
    return list(by.values())


def write_rows(path: str | Path, cfg: ProtocolConfig, rows: list[dict[str, Any]]) -> None:
    """``rows`` and the configuration as JSON (the caller adds provenance)."""
    Path(path).write_text(json.dumps({"config": asdict(cfg), "rows": rows}, indent=1) + "\n")
