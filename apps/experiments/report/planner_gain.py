"""The planner gain per task, from the store's protocol rows (``planner-gain-*`` experiments).

For each task: the edit policy and its controls (the stronger zero-chunk control, the planner
alone at the delay and without it, the privileged ``nodelay`` reference), each mean ± standard
error over the seeds; the planner gain ``g`` and ``edit - planner`` per seed, mean ± SE; the
command's mean |du| per tick of the edit over the privileged policy's; the budgets; and the
acceptance checks (g >= 0.7 and edit - planner > 2 SE on the standard tasks, where g is only
defined when the privileged policy beats the zero-chunk control by more than 2 SE; edit >=
planner and edit >= 0.9 x nodelay on our own; |du| <= 1.2 x nodelay's everywhere).
"""

from __future__ import annotations

from typing import Any

from edgerl.apps.experiments.report.tables import md_table
from edgerl.apps.experiments.store import Store
from edgerl.policies.protocol import QUESTION, has_headroom, rows_from_store, summarize

__all__ = ["gain_rows", "planner_gain", "planner_gain_block"]

#: Own tasks held to edit >= 0.9 x nodelay (the others to edit >= planner alone only).
NODELAY_TASKS = ("cartpole_goal", "ball_goal", "driving", "ball_balance")


def _pm(mean: float, se: float, digits: int) -> str:
    if mean != mean:
        return "-"
    return f"{mean:.{digits}f} ± {se:.{digits}f}"


def gain_rows(store: Store) -> list[dict[str, Any]]:
    """One dict per planner-gain experiment with results: its summary and the checks."""
    out = []
    for e in store.of_question(QUESTION):
        results = store.results_of(e.name)
        if not results:
            continue
        rows = rows_from_store([r for f in results for r in f.rows])
        metric = str(e.run.get("metric", "return_mean"))
        s = summarize(rows, metric)
        cells = s["cells"]
        if not {"edit", "nodelay", "planner"} <= set(cells):
            continue
        role = str(e.report.get("role", ""))
        task = str(e.run.get("task", ""))
        edit, top, plan = cells["edit"], cells["nodelay"], cells["planner"]
        margin = s["edit_minus_planner"]
        rate_ratio = (edit["action_rate"] / top["action_rate"] if top["action_rate"] > 0
                      else float("nan"))
        checks = {"smooth": rate_ratio <= 1.2}
        if role == "own":
            checks["edit >= planner"] = edit["mean"] >= plan["mean"]
            if task in NODELAY_TASKS:
                checks["edit >= 0.9 x nodelay"] = edit["mean"] >= 0.9 * top["mean"]
        else:
            checks["expert beats zero chunks (> 2 SE)"] = has_headroom(s)
            checks["g >= 0.7"] = has_headroom(s) and s["g"]["mean"] >= 0.7
            checks["edit > planner + 2 SE"] = margin["mean"] > 2 * margin["se"]
        out.append({"experiment": e.name, "task": task, "role": role, "metric": metric,
                    "split": str(e.report.get("split", "")),
                    "delay_ms": float(e.run.get("delay_ms", 200.0)), "summary": s,
                    "rate_ratio": rate_ratio, "checks": checks,
                    "declared": store.declared(e) is not None})
    return out


def _row(g: dict[str, Any]) -> list[str]:
    s, c = g["summary"], g["summary"]["cells"]
    digits = 2 if g["metric"] == "success_rate" else 1
    zero = s["zero_control"]
    missed = [k for k, ok in g["checks"].items() if not ok]
    role = g["role"] + (", declared before its run" if g["declared"] else "")
    return [f"{g['task']}, {g['delay_ms']:.0f} ms ({role})",
            _pm(c["edit"]["mean"], c["edit"]["se"], digits),
            _pm(zero["mean"], zero["se"], digits),
            _pm(c["planner"]["mean"], c["planner"]["se"], digits),
            _pm(c["planner@0"]["mean"], c["planner@0"]["se"], digits) if "planner@0" in c
            else "-",
            _pm(c["nodelay"]["mean"], c["nodelay"]["se"], digits),
            _pm(s["g"]["mean"], s["g"]["se"], 2) if has_headroom(s)
            else "undefined (nodelay not above zero)",
            _pm(s["edit_minus_planner"]["mean"], s["edit_minus_planner"]["se"], digits),
            f"{c['edit']['action_rate']:.3g} / {c['nodelay']['action_rate']:.3g} "
            f"({g['rate_ratio']:.2f}x)",
            "pass" if not missed else "not met: " + ", ".join(missed)]


HEADER = ["task, planner delay (role)", "edit", "edit_zero_chunks (stronger of two)",
          "planner alone", "planner, no delay", "privileged nodelay", "g", "edit - planner",
          "mean |du| per tick, edit / nodelay", "checks"]


def planner_gain(store: Store) -> list[str]:
    """The claim, the table and the budgets, for docs/results.md."""
    rows = gain_rows(store)
    if not rows:
        return ["No protocol results stored yet."]
    out = ["Each row is `edgerl protocol TASK` with the one default configuration (3 seeds: "
           "each cell trained per seed and evaluated on episodes of unseen seeds); mean ± "
           "standard error over the seeds. Score: return on the standard tasks, success rate "
           "on our own. The zero-chunk control is the stronger of the same network trained "
           "with and without the warm start; `g = (edit - zero) / (nodelay - zero)` and "
           "`edit - planner` are computed per seed.", ""]
    out += md_table(HEADER, [_row(g) for g in rows])
    out += ["", "Budgets (env steps per training run, warm start included): " + "; ".join(
        f"{g['task']}: edit {g['summary']['cells']['edit'].get('budget_env_steps', 0):,}, "
        f"nodelay {g['summary']['cells']['nodelay'].get('budget_env_steps', 0):,}"
        for g in rows) + ".", "", "Why each split is realistic: " + "; ".join(
        f"{g['task']}: {g['split']}" for g in rows if g["split"]) + "."]
    return out + extra_cells_table(rows)


#: The extra cells' meaning, for the table that compares them with the edit.
EXTRA_TEXT = {"rtc": "rtc (prefix-conditioned planner, open loop)",
              "blend": "blend (chunks blended, open loop)",
              "edit_prefix": "edit over the prefix-conditioned planner"}


def extra_cells_table(rows: list[dict[str, Any]]) -> list[str]:
    """The edit beside the extra cells (training-time RTC and blending) where a task ran
    them: score mean ± SE and mean |du| per tick; [] when none did."""
    from edgerl.policies.protocol import EXTRA_CELLS

    runs = [g for g in rows if any(c in g["summary"]["cells"] for c in EXTRA_CELLS)]
    if not runs:
        return []
    names = ["edit", *EXTRA_CELLS]
    body = []
    for g in runs:
        c = g["summary"]["cells"]
        digits = 2 if g["metric"] == "success_rate" else 1
        body.append([f"{g['task']}, {g['delay_ms']:.0f} ms"] + [
            f"{_pm(c[n]['mean'], c[n]['se'], digits)} (|du| {c[n]['action_rate']:.3g})"
            if n in c else "-" for n in names])
    return ["", "Training-time RTC and blending beside the edit (`--extra-cells "
            "rtc,blend,edit_prefix`; same seeds and budget):", "",
            *md_table(["task, planner delay", "edit", *(EXTRA_TEXT[n] for n in EXTRA_CELLS)],
                      body)]


def planner_gain_block(store: Store) -> str:
    """The README's table (the same rows, fewer columns)."""
    rows = gain_rows(store)
    if not rows:
        return "No protocol results stored yet."
    keep = [0, 1, 2, 3, 5, 6, 7, 8, 9]
    table = md_table([HEADER[i] for i in keep], [[_row(g)[i] for i in keep] for g in rows])
    return "\n".join(table)
