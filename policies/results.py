"""The results grid: tasks x planner delays x methods x seeds -> a results file of the store
(``experiments/planner-matters/results/``), a markdown report and learning curves.

Every cell is one ``train`` + ``eval`` (same code as the CLI verbs). Cells are written to the
results file (:mod:`edgerl.policies.results_rows`, through the results store) as they finish,
each with the provenance of the run that made it, so an interrupted grid resumes where it
stopped (``resume=True`` skips cells already there). Delays per task: ``0``, ``small`` and
``large`` where ``large`` is the smallest whole number of control steps >= ``large_ms`` at the
task's rate (see :func:`grid_delays`).

Every table carries the controls that would expose a method that does not need its planner:
``edit_zero_chunks`` (the same edit network and budget, every chunk zero), ``planner`` alone
(open loop at the same delay) and the privileged ``nodelay`` reference (it reads the goal the
planner knows, with no delay; trained separately, it is a reference, not a bound the edit policy
cannot pass). :func:`acceptance` checks the planner-matters claim.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgerl.contract.methods import LEARNED_METHODS, get_method
from edgerl.policies.results_rows import load_rows, save_rows

__all__ = ["GridCell", "GridConfig", "TASK_PRESETS", "acceptance", "grid_cells", "grid_delays",
           "load_rows", "run_cell", "save_rows", "write_learning_curves", "write_markdown"]

log = logging.getLogger(__name__)

#: Per-task training presets for the grid (modest: 2 shared CPU cores). ``planner``: the chunk
#: planner kind (``bc`` where a learned planner can know the goal from its observation,
#: ``expert`` where the goal is only in the instruction and no learned planner reads it here).
#: ``stop_at_success``: a run ends once its training success rate reaches it (the budget is a
#: cap; only a method that learns the task stops early).
TASK_PRESETS: dict[str, dict[str, Any]] = {
    "cartpole": {"iterations": 60, "num_envs": 64, "planner": "expert"},
    "cartpole_goal": {"iterations": 250, "num_envs": 64, "planner": "bc",
                      "stop_at_success": 0.98},
    "ball_goal": {"iterations": 300, "num_envs": 64, "planner": "bc", "stop_at_success": 0.98},
    "ball_balance": {"iterations": 300, "num_envs": 64, "planner": "bc",
                     "stop_at_success": 0.98},
    "arm_reach": {"iterations": 150, "num_envs": 64, "planner": "expert",
                  "stop_at_success": 0.98},
    "gym:InvertedPendulum-v5": {"iterations": 40, "num_envs": 16, "planner": "bc"},
    "driving": {"iterations": 300, "num_envs": 64, "planner": "expert", "stop_at_success": 0.98},
}
DEFAULT_PRESET = {"iterations": 100, "num_envs": 64, "planner": "expert"}
#: Every registered method, in the order of the result tables' columns.
GRID_METHODS = ("nodelay", "edit", "edit_zero_chunks", "planner", "rtc", "blend", "naive",
                "arli")
#: What each method row means (the tables' legend), from the methods registry; ``nodelay`` is
#: trained on its own, with the privileged observation: a reference a method can beat.
METHOD_LEGEND = {m: get_method(m).summary for m in GRID_METHODS} | {
    "nodelay": "privileged reference: reads the goal the planner knows, acts with no delay "
               "(trained on its own: a method can beat it)"}


def grid_delays(control_hz: float, large_ms: float = 100.0) -> list[int]:
    """``[0, small, large]`` control steps: large = ceil(large_ms at control_hz), small ~ 1/3."""
    large = max(1, math.ceil(large_ms / 1000.0 * control_hz - 1e-9))
    small = max(1, round(large / 3))
    return sorted({0, small, large})


@dataclass(frozen=True)
class GridCell:
    """One training + evaluation."""

    task: str
    delay_steps: int
    method: str
    seed: int

    def key(self) -> tuple[str, int, str, int]:
        return (self.task, self.delay_steps, self.method, self.seed)


@dataclass
class GridConfig:
    """What the grid runs.

    ``methods_at_zero``: methods run at D = 0 (``nodelay`` runs only there: it is the
    reference for every D). ``overrides``: per-task preset changes
    (``{"cartpole": {"iterations": 30}}``).
    """

    tasks: list[str]
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    methods: list[str] = field(default_factory=lambda: list(GRID_METHODS))
    delays: dict[str, list[int]] = field(default_factory=dict)
    episodes: int = 100
    planner: str = ""
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    large_ms: float = 200.0

    def preset(self, task: str) -> dict[str, Any]:
        """Training settings of ``task``: its preset, ``planner`` if set, then overrides."""
        base = {**TASK_PRESETS.get(task, DEFAULT_PRESET)}
        if self.planner:
            base["planner"] = self.planner
        return {**base, **self.overrides.get(task, {})}


def grid_cells(cfg: GridConfig, control_hz: dict[str, float]) -> list[GridCell]:
    """Every cell, most informative first, so a grid cut short still answers the question.

    Per task, three blocks: (1) the ``nodelay`` reference (D = 0 only) and every method at
    the largest D, (2) the smaller non-zero delays, (3) the other methods at D = 0. Within a
    block seeds are the outer loop, so each seed completes the block's comparison.
    """
    cells = []
    for task in cfg.tasks:
        delays = sorted(cfg.delays.get(task) or grid_delays(control_hz[task], cfg.large_ms))
        nonzero = [d for d in reversed(delays) if d != 0]
        priority = [m for m in ("edit", "edit_zero_chunks", "planner", "naive", "rtc", "blend",
                                "arli")
                    if m in cfg.methods]
        reference = [m for m in cfg.methods if get_method(m).no_delay]
        priority += [m for m in cfg.methods if m not in priority and m not in reference]
        blocks = [[(0, m) for m in reference]
                  + [(d, m) for d in nonzero[:1] for m in priority],
                  [(d, m) for d in nonzero[1:] for m in priority],
                  [(0, m) for m in priority] if 0 in delays else []]
        for pairs in blocks:
            for seed in cfg.seeds:
                cells += [GridCell(task, d, m, seed) for d, m in pairs]
    return cells


def run_cell(cell: GridCell, grid: GridConfig, root: str | Path,
             show_progress: bool = False) -> dict[str, Any]:
    """Train and evaluate one cell; the results row."""
    from edgerl.policies.config import TrainConfig
    from edgerl.policies.evaluate import evaluate_run
    from edgerl.policies.train import train

    preset = grid.preset(cell.task)
    cfg = TrainConfig(task=cell.task, method=cell.method, delay_steps=cell.delay_steps,
                      seed=cell.seed, privileged=get_method(cell.method).no_delay, **preset)
    out = Path(root) / f"{cell.task}__{cell.method}__d{cell.delay_steps}__s{cell.seed}"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    result = train(cfg, out=out, show_progress=show_progress)
    ev = evaluate_run(str(out), grid.episodes, show_progress=show_progress)
    return {"task": cell.task, "delay_steps": cell.delay_steps, "delay_ms": ev["delay_ms"],
            "method": cell.method, "seed": cell.seed, "success_rate": ev["success_rate"],
            "return_mean": ev["return_mean"], "return_std": ev["return_std"],
            "episodes": ev["episodes"], "train_wall_s": round(result.wall_s, 2),
            "env_steps": result.env_steps, "run": str(out), "planner": cfg.planner,
            "edit_inputs": cfg.edit_inputs, "privileged": cfg.privileged}


# --- aggregation ---------------------------------------------------------------------------
def _stats(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return float("nan"), float("nan")
    mean = statistics.fmean(values)
    std = statistics.pstdev(values) if len(values) > 1 else 0.0
    return mean, std


def aggregate(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, int, str], dict[str, Any]]:
    """(task, D, method) -> mean/std of success and return over seeds."""
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["task"], r["delay_steps"], r["method"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        s_mean, s_std = _stats([r["success_rate"] for r in rs])
        r_mean, r_std = _stats([r["return_mean"] for r in rs])
        out[key] = {"success_mean": s_mean, "success_std": s_std, "return_mean": r_mean,
                    "return_std": r_std, "seeds": len(rs), "delay_ms": rs[0]["delay_ms"]}
    return out


def acceptance(rows: list[dict[str, Any]], min_delay_ms: float = 200.0) -> list[dict[str, Any]]:
    """The planner-matters checks per task at every D >= ``min_delay_ms`` that has ``edit``.

    * ``edit`` >= 0.9 x the privileged ``nodelay`` reference (trained at D = 0);
    * ``edit_zero_chunks`` <= 0.5 x ``edit``: without the planner's chunks the same network
      fails, so the planner matters;
    * ``edit`` >= ``planner`` alone + 0.2: the fast edit adds what the late planner lacks.

    A check whose reference cell is missing is ``None`` and the row does not pass.
    """
    agg = aggregate(rows)
    checks = []
    for (task, d, method), a in sorted(agg.items()):
        if method != "edit" or a["delay_ms"] < min_delay_ms - 1e-9:
            continue
        edit = a["success_mean"]
        refs = {"nodelay": agg.get((task, 0, "nodelay")),
                "edit_zero_chunks": agg.get((task, d, "edit_zero_chunks")),
                "planner": agg.get((task, d, "planner"))}
        check: dict[str, Any] = {"task": task, "delay_steps": d, "delay_ms": a["delay_ms"],
                                 "edit": edit, "seeds": a["seeds"]}
        for name, ref in refs.items():
            check[name] = None if ref is None else ref["success_mean"]
        check["edit_vs_nodelay"] = (None if refs["nodelay"] is None
                                    else edit >= 0.9 * check["nodelay"])
        check["planner_matters"] = (None if refs["edit_zero_chunks"] is None
                                    else check["edit_zero_chunks"] <= 0.5 * edit)
        check["edit_vs_planner"] = (None if refs["planner"] is None
                                    else edit >= check["planner"] + 0.2)
        check["pass"] = all(check[k] is True for k in
                            ("edit_vs_nodelay", "planner_matters", "edit_vs_planner"))
        checks.append(check)
    return checks


def _fmt(mean: float, std: float, digits: int) -> str:
    if mean != mean:
        return "-"
    return f"{mean:.{digits}f} ± {std:.{digits}f}"


def write_markdown(rows: list[dict[str, Any]], path: str | Path, command: str = "",
                   notes: str = "") -> None:
    """The grid's own report: per task, a success table and a return table (methods x
    delays), mean ± std over seeds, and the planner-matters checks."""
    agg = aggregate(rows)
    tasks = sorted({k[0] for k in agg})
    lines = ["# Results: does the slow planner matter?", "",
             "Mean ± std over seeds of the evaluation success rate and return (each seed: one "
             "training run, then `edgerl eval` episodes on unseen seeds). `nodelay` is trained "
             "once at D = 0 with the privileged observation and is the reference in every "
             "column (a reference, not a bound: a method may beat it). D = planner delay "
             "(edit, edit_zero_chunks, planner, rtc, blend) or "
             "action delay (naive, arli), in control steps. The edit policy reads only the "
             "task's fast observation (the goal is hidden from it: `TaskSpec.planner_only`).", "",
             "| method | what it is |", "|---|---|"]
    lines += [f"| {m} | {text} |" for m, text in METHOD_LEGEND.items()]
    lines.append("")
    if command:
        lines += ["Reproduce:", "", "```", command, "```", ""]
    for task in tasks:
        delays = sorted({k[1] for k in agg if k[0] == task})
        methods = [m for m in GRID_METHODS if any(k[0] == task and k[2] == m for k in agg)]
        header = [f"D={d} ({agg_ms(agg, task, d):.0f} ms)" for d in delays]
        for title, key, digits in (("success rate", "success", 2), ("return", "return", 1)):
            lines += [f"## {task}: {title}", "", "| method | " + " | ".join(header) + " |",
                      "|---|" + "---|" * len(delays)]
            for m in methods:
                cells = []
                for d in delays:
                    a = agg.get((task, d, m)) or (agg.get((task, 0, m)) if m == "nodelay"
                                                  else None)
                    cells.append("-" if a is None else
                                 _fmt(a[f"{key}_mean"], a[f"{key}_std"], digits)
                                 + ("" if a["seeds"] >= 3 else f" (n={a['seeds']})"))
                lines.append(f"| {m} | " + " | ".join(cells) + " |")
            lines.append("")
    checks = acceptance(rows)
    if checks:
        lines += ["## Does the planner matter? (D >= 200 ms)", "",
                  "| task | D | edit | nodelay (priv.) | edit_zero_chunks | planner | "
                  "edit >= 0.9 nodelay | zero chunks <= 0.5 edit | edit >= planner + 0.2 |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for c in checks:
            def f(x: Any) -> str:
                return "-" if x is None else (f"{x:.2f}" if isinstance(x, float) else str(x))
            lines.append(f"| {c['task']} | {c['delay_steps']} ({c['delay_ms']:.0f} ms) | "
                         f"{f(c['edit'])} | {f(c['nodelay'])} | {f(c['edit_zero_chunks'])} | "
                         f"{f(c['planner'])} | {f(c['edit_vs_nodelay'])} | "
                         f"{f(c['planner_matters'])} | {f(c['edit_vs_planner'])} |")
        lines.append("")
    if notes:
        lines += [notes, ""]
    Path(path).write_text("\n".join(lines))


def agg_ms(agg: dict, task: str, d: int) -> float:
    for (t, dd, _), a in agg.items():
        if t == task and dd == d:
            return float(a["delay_ms"])
    return float("nan")


def write_learning_curves(rows: list[dict[str, Any]], path: str | Path) -> bool:
    """PNG: per task, success rate vs env steps (mean over seeds) of each learned method at
    the largest delay (and nodelay). Returns False when no curve was found."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = sorted({r["task"] for r in rows})
    if not tasks:
        return False
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 3.6), squeeze=False)
    found = False
    for ax, task in zip(axes[0], tasks):
        d_max = max(r["delay_steps"] for r in rows if r["task"] == task)
        for method in LEARNED_METHODS:
            d = 0 if get_method(method).no_delay else d_max
            curves = []
            for r in rows:
                if (r["task"], r["delay_steps"], r["method"]) != (task, d, method):
                    continue
                metrics = Path(r.get("run", "")) / "metrics.jsonl"
                if not metrics.is_file():
                    continue
                pts = [json.loads(line) for line in metrics.read_text().splitlines() if line]
                curves.append([(p["env_steps"], p["success_rate"]) for p in pts
                               if p["success_rate"] is not None])
            curves = [c for c in curves if c]
            if not curves:
                continue
            n = min(len(c) for c in curves)
            xs = [curves[0][i][0] for i in range(n)]
            ys = [statistics.fmean(c[i][1] for c in curves) for i in range(n)]
            ax.plot(xs, ys, label=f"{method} (D={d})")
            found = True
        ax.set_title(f"{task}")
        ax.set_xlabel("env steps")
        ax.set_ylabel("training success rate (last 100 episodes)")
        ax.set_ylim(-0.02, 1.02)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return found
