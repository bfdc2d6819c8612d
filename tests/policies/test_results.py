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


def test_grid_delays_reach_large_ms():
    assert grid_delays(50.0, 100.0) == [0, 2, 5]  # 5 steps = 100 ms
    assert grid_delays(20.0, 100.0) == [0, 1, 2]  # 2 steps = 100 ms
    assert grid_delays(30.0, 100.0) == [0, 1, 3]  # 3 steps = 100 ms (ceil, never below)
    assert GridConfig(tasks=["t"]).large_ms == 200.0  # the default grid's largest delay
    assert grid_delays(50.0, 200.0) == [0, 3, 10]


def test_grid_cells_run_nodelay_only_at_zero():
    grid = GridConfig(tasks=["cartpole"], seeds=[0, 1], methods=["nodelay", "edit"])
    cells = grid_cells(grid, {"cartpole": 50.0})
    nodelay = [c for c in cells if c.method == "nodelay"]
    assert {c.delay_steps for c in nodelay} == {0}
    assert len(nodelay) == 2 and len(cells) == 2 + 2 * 3


def _claim_rows(edit, zero, planner, nodelay, d=10):
    rows = [_row("t", 0, "nodelay", s, v) for s, v in enumerate(nodelay)]
    rows += [_row("t", d, "edit", s, v) for s, v in enumerate(edit)]
    rows += [_row("t", d, "edit_zero_chunks", s, v) for s, v in enumerate(zero)]
    rows += [_row("t", d, "planner", s, v) for s, v in enumerate(planner)]
    return rows


def test_aggregate_and_planner_matters_acceptance():
    rows = _claim_rows(edit=[0.95, 0.9, 1.0], zero=[0.2, 0.1, 0.15], planner=[0.2, 0.3, 0.25],
                       nodelay=[1.0, 0.9, 0.95])
    agg = aggregate(rows)
    assert agg[("t", 10, "edit")]["success_mean"] == pytest.approx(0.95)
    assert agg[("t", 10, "edit")]["success_std"] == pytest.approx(0.0408, abs=1e-3)
    (check,) = acceptance(rows)
    assert check["delay_ms"] == 200.0 and check["edit_zero_chunks"] == pytest.approx(0.15)
    assert check["edit_vs_nodelay"] is True  # 0.95 >= 0.9 * 0.95
    assert check["planner_matters"] is True  # 0.15 <= 0.5 * 0.95
    assert check["edit_vs_planner"] is True  # 0.95 >= 0.25 + 0.2
    assert check["pass"] is True


@pytest.mark.parametrize("edit, zero, planner, failing", [
    ([0.8] * 3, [0.1] * 3, [0.1] * 3, "edit_vs_nodelay"),  # 0.8 < 0.9 * 0.95
    ([0.95] * 3, [0.6] * 3, [0.1] * 3, "planner_matters"),  # the edit needs no planner
    ([0.95] * 3, [0.1] * 3, [0.8] * 3, "edit_vs_planner")])  # the planner alone is enough
def test_each_planner_matters_check_can_fail(edit, zero, planner, failing):
    (check,) = acceptance(_claim_rows(edit, zero, planner, nodelay=[0.95] * 3))
    assert check[failing] is False and check["pass"] is False
    assert all(check[k] is True for k in ("edit_vs_nodelay", "planner_matters",
                                         "edit_vs_planner") if k != failing)


def test_missing_control_fails_instead_of_passing_silently():
    rows = _claim_rows([0.95] * 3, [0.1] * 3, [0.1] * 3, [0.95] * 3)
    (check,) = acceptance([r for r in rows if r["method"] != "edit_zero_chunks"])
    assert check["planner_matters"] is None and check["pass"] is False
    # delays below 200 ms are not judged
    assert acceptance(_claim_rows([0.95] * 3, [0.1] * 3, [0.1] * 3, [0.95] * 3, d=5)) == []


def test_report_files(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    metrics = [{"iteration": i, "env_steps": 100 * (i + 1), "success_rate": i / 4}
               for i in range(5)]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(m) for m in metrics) + "\n")
    rows = [_row("t", 0, "nodelay", 0, 1.0, 10.0, str(run)),
            _row("t", 5, "edit", 0, 0.97, 9.0, str(run)),
            _row("t", 5, "edit_zero_chunks", 0, 0.2, 3.0, str(run)),
            _row("t", 5, "planner", 0, 0.1, 2.0)]
    md = tmp_path / "results.md"
    write_markdown(rows, md, command="edgerl results --tasks t")
    text = md.read_text()
    assert "## t: success rate" in text
    assert "| edit | - | 0.97 ± 0.00 (n=1) |" in text
    assert "| nodelay | 1.00 ± 0.00 (n=1) | 1.00 ± 0.00 (n=1) |" in text
    assert "| edit_zero_chunks | - | 0.20 ± 0.00 (n=1) |" in text
    assert "| edit_zero_chunks | ablation: the same edit network and budget" in text
    assert "edgerl results --tasks t" in text
    png = tmp_path / "curves.png"
    assert write_learning_curves(rows, png) is True
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_results_cli_merges_and_reports(tmp_path, capsys):
    from edgerl.apps.cli import main
    from edgerl.policies.results import load_rows, save_rows

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    save_rows(a, [_row("cartpole", 0, "nodelay", 0, 1.0, 10.0),
                  _row("cartpole", 10, "edit", 0, 0.5, 5.0)])
    save_rows(b, [_row("cartpole", 10, "edit", 0, 0.99, 9.5),
                  _row("cartpole", 10, "edit_zero_chunks", 0, 0.1, 1.0),
                  _row("cartpole", 10, "planner", 0, 0.2, 2.0)])
    notes = tmp_path / "notes.md"
    notes.write_text("Extra note.")
    out = tmp_path / "results.json"
    code = main(["results", "--tasks", "cartpole", "--report-only", "--merge", f"{a},{b}",
                 "--json-out", str(out), "--md-out", str(tmp_path / "r.md"),
                 "--png-out", str(tmp_path / "c.png"), "--reproduce", "make results",
                 "--notes", str(notes), "--json"])
    assert code == 0
    rows = load_rows(out)
    assert len(rows) == 4  # b's edit row replaced a's
    assert [r["success_rate"] for r in rows if r["method"] == "edit"] == [0.99]
    (check,) = json.loads(capsys.readouterr().out)
    assert check["pass"] is True and check["delay_ms"] == 200.0
    text = (tmp_path / "r.md").read_text()
    assert "make results" in text and text.rstrip().endswith("Extra note.")


def test_grid_lists_every_registered_method_once():
    from edgerl.contract.methods import METHODS
    from edgerl.policies.results import GRID_METHODS, METHOD_LEGEND

    assert sorted(GRID_METHODS) == sorted(METHODS)
    assert list(METHOD_LEGEND) == list(GRID_METHODS) and all(METHOD_LEGEND.values())


def test_grid_cells_round_trip_through_the_results_store(tmp_path):
    """A grid file is a results file of the store: provenance on top, one row per number, and
    a cell added by a later run keeps that run's provenance."""
    from edgerl.contract.results_store import Provenance, read_results
    from edgerl.policies.results import load_rows, save_rows

    late = Provenance(command="edgerl results --tasks t", commit="unknown",
                      date="2026-12-05T10:00:00Z", machine={"cpu_count": 2,
                                                            "load_average": [0.5]})
    cells = [_row("t", 0, "nodelay", 0, 1.0, 10.0),
             {**_row("t", 5, "edit", 1, 0.9, 9.0), "_provenance": late.to_dict()}]
    path = tmp_path / "grid.json"
    save_rows(path, cells, config={"tasks": ["t"]})
    doc = read_results(path)
    assert doc.experiment == "planner-matters-grid" and doc.seeds == [0, 1]
    assert doc.select(method="edit", metric="success_rate")[0]["provenance"]["date"] == (
        "2026-12-05T10:00:00Z")
    assert "provenance" not in doc.select(method="nodelay", metric="success_rate")[0]
    back = sorted(load_rows(path), key=lambda c: c["method"])
    assert [c["success_rate"] for c in back] == [0.9, 1.0]
    assert back[0]["_provenance"] == late.to_dict()


def test_a_grid_file_of_another_schema_is_refused(tmp_path):
    from edgerl.contract.results_store import ResultsFormatError
    from edgerl.policies.results import load_rows

    path = tmp_path / "old.json"
    path.write_text(json.dumps([_row("t", 0, "nodelay", 0, 1.0)]))
    with pytest.raises(ResultsFormatError, match="old.json: not a results document"):
        load_rows(path)
