"""The planner-matters grid's tables: per task, success and return for each method and planner
delay, mean ± standard error over the seeds (n where fewer than 3)."""

from __future__ import annotations

from collections import defaultdict

from edgerl.apps.experiments.report.tables import md_table
from edgerl.apps.experiments.stats import estimate
from edgerl.apps.experiments.store import Store
from edgerl.policies.results import GRID_METHODS, METHOD_LEGEND
from edgerl.policies.results_rows import cells_from_rows

__all__ = ["grid_tables"]


def grid_tables(store: Store, name: str) -> list[str]:
    cells = [c for r in store.results_of(name) for c in cells_from_rows(r.rows)]
    if not cells:
        return []
    by = defaultdict(list)
    for c in cells:
        by[(c["task"], c["delay_steps"], c["method"])].append(c)
    out = ["| method | what it is |", "|---|---|"]
    out += [f"| {m} | {t} |" for m, t in METHOD_LEGEND.items()
            if any(c["method"] == m for c in cells)]
    out += ["", "Each cell: mean ± standard error over the seeds (each seed one training run); "
            "`nodelay` runs at D = 0 only and is repeated in every column as the reference."]
    for task in sorted({c["task"] for c in cells}):
        delays = sorted({d for (t, d, _m) in by if t == task})
        ms = {d: by_d[0]["delay_ms"] for (t, d, _m), by_d in by.items() if t == task}
        methods = [m for m in GRID_METHODS if any(k[0] == task and k[2] == m for k in by)]
        for title, key, digits in (("success rate", "success_rate", 2),
                                   ("return", "return_mean", 1)):
            rows = []
            for m in methods:
                row = [m]
                for d in delays:
                    got = by.get((task, d, m)) or (by.get((task, 0, m)) if m == "nodelay"
                                                   else None)
                    vals = [float(c[key]) for c in got or [] if key in c]
                    row.append(estimate(vals).text(digits) if vals else "-")
                rows.append(row)
            out += ["", f"**{task}: {title}**", ""]
            out += md_table(["method", *[f"D={d} ({ms[d]:.0f} ms)" for d in delays]], rows)
    return out
