"""Where the runs of ``edgerl bench ratios`` are kept: the results store (one ``bench-ratios``
results file per run, with provenance), an optional JSON-lines file, and the trend plot of
every ratio over the recorded runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["RECORD", "append_history", "plot_trend", "ratio_rows", "record_ratios",
           "recorded_lines"]


def append_history(path: Path, line: dict[str, Any]) -> None:
    """Append ``line`` as one JSON line to ``path`` (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fh.write(json.dumps(line, sort_keys=True) + "\n")


#: Where :func:`record_ratios` writes in a results store (question, experiment).
RECORD = ("runtime-timing", "bench-ratios")


def ratio_rows(line: dict[str, Any]) -> list[dict[str, Any]]:
    """A run's line as results rows: every field of every ratio (``{"ratio", "metric",
    "value"}``), then the run's time, revision, duration and loads."""
    rows = []
    for name, ratio in sorted(line["ratios"].items()):
        for key, value in ratio.items():
            numbers = isinstance(value, list) and all(isinstance(v, (int, float))
                                                      for v in value)
            if isinstance(value, (int, float, str, bool)) or value is None or numbers:
                rows.append({"ratio": name, "metric": key, "value": value})
    rows += [{"metric": key, "value": line[key]}
             for key in ("utc", "git", "seconds", "load_before", "load_after")]
    return rows


def record_ratios(store: Path, line: dict[str, Any]) -> Path:
    """Write the run ``line`` into the results store ``store`` (``experiments/``) as one
    ``bench-ratios`` results file with provenance; its path."""
    from edgerl.contract.results_store import write_results

    question, experiment = RECORD
    stamp = line["utc"].replace("-", "").replace(":", "").rstrip("Z").lower()
    path = store / question / "results" / f"{experiment}-{stamp}.json"
    k = 1
    while path.exists():  # two runs within one second: keep both
        k += 1
        path = path.with_name(f"{experiment}-{stamp}-{k}.json")
    write_results(path, experiment=experiment, question=question, config={}, seeds=[],
                  rows=ratio_rows(line))
    return path


def recorded_lines(store: Path) -> list[dict[str, Any]]:
    """The recorded runs of the store, oldest first, as ``{"ratios": {name: {"ratio": ..}}}``."""
    from edgerl.contract.results_store import read_results

    question, experiment = RECORD
    docs = [read_results(p) for p in sorted((store / question / "results").glob(
        f"{experiment}-*.json"))]
    docs.sort(key=lambda d: d.date)
    out = []
    for doc in docs:
        ratios: dict[str, dict[str, Any]] = {}
        for row in doc.rows:
            if "ratio" in row and row["metric"] == "ratio":
                ratios.setdefault(row["ratio"], {})["ratio"] = row["value"]
        out.append({"ratios": ratios})
    return out


def plot_trend(lines: list[dict[str, Any]], png: Path, xlabel: str = "run",
               targets: dict[str, tuple[float | None, str]] | None = None) -> None:
    """Each ratio over the runs ``lines`` (x = run index); with ``targets`` (ratio name prefix
    -> (target, sense)), each target a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({n for ln in lines for n in ln.get("ratios", {})})
    fig, axes = plt.subplots(len(names) or 1, 1, figsize=(7, 1.6 * max(1, len(names))),
                             sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        xs = [i for i, ln in enumerate(lines) if name in ln.get("ratios", {})]
        ax.plot(xs, [lines[i]["ratios"][name]["ratio"] for i in xs], "o-", ms=3)
        target = (targets or {}).get(name.split("/", 1)[0], (None, ""))[0]
        if target is not None:
            ax.axhline(target, ls="--", c="grey", lw=0.8)
        ax.set_ylabel(name, rotation=0, ha="right", fontsize=8)
    axes[-1, 0].set_xlabel(xlabel)
    fig.suptitle("edgerl: ratio of each path to its limit, same run")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=90)
    plt.close(fig)
