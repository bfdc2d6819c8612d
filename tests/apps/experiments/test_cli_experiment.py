"""``edgerl experiment run|list`` and ``edgerl results docs`` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

from edgerl.apps.cli import main

ROOT = Path(__file__).resolve().parents[3]


def test_dry_run_prints_the_steps(capsys):
    config = ROOT / "experiments" / "planning-gate" / "gate-hil-paired-third-look.toml"
    assert main(["experiment", "run", str(config), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    hil = [line for line in lines if line.startswith("edgerl hil")]
    assert len(hil) == 18 and hil[0].endswith("&")
    assert "--seed 3600 --gate-policy gate:sample" in hil[0]


def test_list_names_every_experiment(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert main(["experiment", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    names = {r["name"] for r in rows}
    assert {"rlif-region-flip-greedy-five-rounds", "gate-hil-paired-third-look",
            "planner-matters-grid", "bench-ratios"} <= names


def test_results_docs_check_passes_on_the_checkout(capsys):
    assert main(["results", "docs", "--store", "experiments", "--root", str(ROOT),
                 "--check"]) == 0
    assert capsys.readouterr().out == ""
