"""Results grid bookkeeping: delays per rate, aggregation, acceptance, report files."""

from __future__ import annotations

import json

import pytest

from edgerl.policies.results import (
    GridConfig,
    acceptance,
    aggregate,
    grid_cells,
    grid_delays,
    write_learning_curves,
    write_markdown,
)


def _row(task, d, method, seed, success, ret=0.0, run=""):
    return {"task": task, "delay_steps": d, "delay_ms": d * 20.0, "method": method,
            "seed": seed, "success_rate": success, "return_mean": ret, "run": run}


def test_grid_delays_reach_100_ms():
    assert grid_delays(50.0) == [0, 2, 5]  # 5 steps = 100 ms
    assert grid_delays(20.0) == [0, 1, 2]  # 2 steps = 100 ms
    assert grid_delays(30.0) == [0, 1, 3]  # 3 steps = 100 ms (ceil, never below)


def test_grid_cells_run_nodelay_only_at_zero():
    grid = GridConfig(tasks=["cartpole"], seeds=[0, 1], methods=["nodelay", "edit"])
    cells = grid_cells(grid, {"cartpole": 50.0})
    nodelay = [c for c in cells if c.method == "nodelay"]
    assert {c.delay_steps for c in nodelay} == {0}
    assert len(nodelay) == 2 and len(cells) == 2 + 2 * 3


def test_aggregate_and_acceptance():
    rows = [_row("t", 0, "nodelay", s, v) for s, v in enumerate([1.0, 0.9, 0.95])]
    rows += [_row("t", 5, "edit", s, v) for s, v in enumerate([0.95, 0.9, 1.0])]
    rows += [_row("t", 5, "planner", s, v) for s, v in enumerate([0.2, 0.3, 0.25])]
    rows += [_row("t", 5, "naive", s, v) for s, v in enumerate([0.5, 0.9, 0.1])]
    agg = aggregate(rows)
    assert agg[("t", 5, "edit")]["success_mean"] == pytest.approx(0.95)
    assert agg[("t", 5, "edit")]["success_std"] == pytest.approx(0.0408, abs=1e-3)
    (check,) = acceptance(rows)
    assert check["vs_nodelay"] is True and check["vs_planner"] is True
    # naive: mean 0.5, std 0.327 -> 0.95 - 0.5 = 0.45 > 0.327
    assert check["vs_naive"] is True and check["pass"] is True
    for r, v in zip(rows[-3:], [0.9, 0.95, 0.9]):  # naive 0.917: gap 0.033 < edit std 0.041
        r["success_rate"] = v
    (check,) = acceptance(rows)
    assert check["vs_naive"] is False and check["pass"] is False
    # a missing reference fails the check instead of passing silently
    (check,) = acceptance([r for r in rows if r["method"] != "nodelay"])
    assert check["vs_nodelay"] is None and check["pass"] is False


def test_report_files(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    metrics = [{"iteration": i, "env_steps": 100 * (i + 1), "success_rate": i / 4}
               for i in range(5)]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(m) for m in metrics) + "\n")
    rows = [_row("t", 0, "nodelay", 0, 1.0, 10.0, str(run)),
            _row("t", 5, "edit", 0, 0.97, 9.0, str(run)),
            _row("t", 5, "planner", 0, 0.1, 2.0)]
    md = tmp_path / "results.md"
    write_markdown(rows, md, command="edgerl results --tasks t")
    text = md.read_text()
    assert "## t: success rate" in text
    assert "| edit | - | 0.97 ± 0.00 (n=1) |" in text
    assert "| nodelay | 1.00 ± 0.00 (n=1) | 1.00 ± 0.00 (n=1) |" in text
    assert "edgerl results --tasks t" in text
    png = tmp_path / "curves.png"
    assert write_learning_curves(rows, png) is True
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_results_cli_merges_and_reports(tmp_path, capsys):
    from edgerl.cli import main

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps([_row("cartpole", 0, "nodelay", 0, 1.0, 10.0),
                             _row("cartpole", 5, "edit", 0, 0.5, 5.0)]))
    b.write_text(json.dumps([_row("cartpole", 5, "edit", 0, 0.99, 9.5),
                             _row("cartpole", 5, "planner", 0, 0.2, 2.0),
                             _row("cartpole", 5, "naive", 0, 0.1, 1.0)]))
    notes = tmp_path / "notes.md"
    notes.write_text("Extra note.")
    out = tmp_path / "results.json"
    code = main(["results", "--tasks", "cartpole", "--report-only", "--merge", f"{a},{b}",
                 "--json-out", str(out), "--md-out", str(tmp_path / "r.md"),
                 "--png-out", str(tmp_path / "c.png"), "--reproduce", "make results",
                 "--notes", str(notes), "--json"])
    assert code == 0
    rows = json.loads(out.read_text())
    assert len(rows) == 4  # b's edit row replaced a's
    assert [r["success_rate"] for r in rows if r["method"] == "edit"] == [0.99]
    (check,) = json.loads(capsys.readouterr().out)
    assert check["pass"] is True and check["delay_ms"] == 100.0
    text = (tmp_path / "r.md").read_text()
    assert "make results" in text and text.rstrip().endswith("Extra note.")
