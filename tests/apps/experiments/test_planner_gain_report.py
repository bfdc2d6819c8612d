"""The planner-gain report's tables from protocol summaries (no store needed)."""

from __future__ import annotations

from edgerl.apps.experiments.report.planner_gain import extra_cells_table
from edgerl.policies.protocol import summarize


def _gain(values: dict[str, list[float]]) -> dict:
    rows = [{"cell": name, "seed": s, "success_rate": v, "action_rate": 0.01 * (s + 1)}
            for name, vs in values.items() for s, v in enumerate(vs)]
    return {"task": "cartpole_goal", "delay_ms": 200.0, "metric": "success_rate",
            "summary": summarize(rows, "success_rate")}


def test_extra_cells_sit_beside_the_edit_and_missing_ones_show_a_dash():
    g = _gain({"nodelay": [1.0, 1.0], "edit": [0.9, 1.0], "edit_zero_chunks": [0.0, 0.1],
               "planner": [0.0, 0.0], "rtc": [0.2, 0.4], "edit_prefix": [0.8, 1.0]})
    lines = extra_cells_table([g])
    row = next(line for line in lines if line.startswith("| cartpole_goal"))
    from edgerl.apps.experiments.report.tables import _cells

    cells = [""] + _cells(row)[1:]  # a bare | inside a cell would have split it
    assert len(cells) == 5 and cells[1] == "0.95 ± 0.05 (\\|du\\| 0.015)"
    assert cells[2].startswith("0.30 ± 0.10") and cells[3] == "-"
    assert cells[4].startswith("0.90 ± 0.10")
    assert extra_cells_table([_gain({"nodelay": [1.0], "edit": [0.9]})]) == []
