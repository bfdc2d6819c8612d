"""The ``edgerl bench ratios`` runs in the store: each path against its limit measured in the
same run, per run and over the history."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from edgerl.apps.experiments.report.tables import md_table
from edgerl.apps.experiments.store import Store

__all__ = ["ratio_claims", "ratio_history", "ratio_runs"]

#: each ratio's target (what `met` judges)
TARGETS = {"train/cartpole": ">= 0.5", "train/ball_balance": ">= 0.5", "sim/arm_reach": ">= 0.75",
           "sim/arm_push": ">= 0.75", "sim/ball_balance": ">= 0.75", "loop/jitter_p99": "<= 1.5",
           "loop/miss_rate": "<= 1.5, not significantly above", "hil/rtt_p99": "<= 2",
           "ros2/e2e_p99": "none", "ros2/node_tick_p99": "none"}


def ratio_runs(store: Store) -> list[dict[str, Any]]:
    """Each run: utc, load before/after, and per ratio its fields (ours, reference, ratio,
    unit, met, ...)."""
    runs = []
    for f in sorted(store.results_of("bench-ratios"), key=lambda f: f.path.name):
        run: dict[str, Any] = {"ratios": defaultdict(dict), "commit": f.commit}
        for r in f.rows:
            if "ratio" in r:
                run["ratios"][r["ratio"]][r["metric"]] = r["value"]
            else:
                run[r["metric"]] = r["value"]
        runs.append(run)
    return runs


def _num(x: float) -> str:
    """A measured figure, short: 1.09M, 937k, 394, 1.06."""
    if abs(x) >= 1e6:
        return f"{x / 1e6:.2f}M"
    if abs(x) >= 1e4:
        return f"{x / 1e3:.0f}k"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _cell(x: dict[str, Any]) -> str:
    if "ratio" not in x:
        return "-"
    mark = {True: " met", False: " **not met**", None: ""}.get(x.get("met"), "")
    return f"{x['ratio']:.2f}{mark}"


def ratio_history(store: Store) -> list[str]:
    runs = ratio_runs(store)
    names = [n for n in TARGETS if any(n in r["ratios"] for r in runs)]
    rows = [[r["utc"][:16].replace("T", " "), f"{r['load_before'][0]:.1f} -> "
             f"{r['load_after'][0]:.1f}", r["git"], *[_cell(r["ratios"].get(n, {}))
                                                     for n in names]] for r in runs]
    return (["Every run, one line (the ratio of our path to its reference measured in the same "
             "run; the target of each is in the table above):", ""]
            + md_table(["run (UTC)", "load", "code", *[f"`{n}`" for n in names]], rows))


def ratio_claims(store: Store) -> list[str]:
    runs = ratio_runs(store)
    if not runs:
        return []
    rows = []
    for name, target in TARGETS.items():
        seen = [r["ratios"][name] for r in runs if name in r["ratios"]]
        if not seen:
            continue
        judged = [x for x in seen if x.get("met") is not None]
        last = seen[-1]
        unit = last.get("unit", "")
        rows.append([f"`{name}`", target,
                     f"{last['ratio']:.2f} ({_num(last['ours'])} / {_num(last['reference'])} "
                     f"{unit})",
                     f"{sum(bool(x['met']) for x in judged)} of {len(judged)}" if judged
                     else "no target"])
    return (["Each path against its limit measured in the same run (`edgerl bench ratios`: our "
             "path / a reference in the same minutes). Met counts over every stored run "
             f"({len(runs)} runs, {runs[0]['utc'][:10]} to {runs[-1]['utc'][:10]}; the rows "
             "each run measured):", ""]
            + md_table(["ratio", "target", "latest run: ratio (ours / reference)",
                        "met in runs"], rows)
            + ["", "`loop/miss_rate` is the one row that depends on the host's minute: its "
               "misses come in bursts that hit the bare loop too (runtime-timing's notes)."])
