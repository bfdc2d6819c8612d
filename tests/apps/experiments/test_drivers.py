"""The drivers: a dry run lists what the run would issue; a run writes its results through the
store with the provenance of the command that made them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgerl.apps.experiments.config import load_config
from edgerl.apps.experiments.execute import DryRunExecutor, render
from edgerl.apps.experiments.runner import dry_run_lines, run_experiment
from edgerl.apps.experiments.store import load_store
from edgerl.apps.experiments.templated import resolve, run_steps
from edgerl.contract.errors import UserError
from edgerl.contract.results_store import read_results

ROOT = Path(__file__).resolve().parents[3]


def _config(tmp_path: Path, body: str, name: str = "tiny-probe", question: str = "q") -> Path:
    folder = tmp_path / "experiments" / question
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(f'[experiment]\nname = "{name}"\nquestion = "{question}"\ntitle = "t"\n'
                    f'date = "2026-12-06"\n' + body)
    return path


def test_every_config_with_a_driver_lists_its_steps():
    store = load_store(ROOT / "experiments")
    runnable = [e for e in store.experiments if e.run]
    assert len(runnable) >= 40
    for e in runnable:
        lines = dry_run_lines(e.path, ROOT)
        assert lines and all("\n" not in line for line in lines), e.name


def test_a_run_writes_its_results_through_the_store(tmp_path):
    path = _config(tmp_path, '[run]\ndriver = "probe"\nmodule = "gate_sequential_alpha"\n'
                             'args = ["--paths", "2000", "--json"]\n')
    (written,) = run_experiment(path, root=tmp_path, argv=["experiment", "run", "x.toml"])
    doc = read_results(written)
    assert written == tmp_path / "experiments" / "q" / "results" / "tiny-probe.json"
    assert doc.command == "edgerl experiment run x.toml" and doc.date.endswith("Z")
    assert doc.config["run"]["module"] == "gate_sequential_alpha"
    alpha = {r["metric"]: r["value"] for r in doc.rows if r["metric"].endswith(".alpha")}
    assert len(alpha) == 2 and all(0 < v < 0.1 for v in alpha.values())
    with pytest.raises(UserError, match="exists; pass --force"):
        run_experiment(path, root=tmp_path)


def test_a_config_is_checked(tmp_path):
    bad = _config(tmp_path, '[run]\ndriver = "probe"\nmodule = "x"\nflavour = 1\n')
    with pytest.raises(UserError, match=r"unknown setting\(s\) \['flavour'\]"):
        dry_run_lines(bad)
    with pytest.raises(UserError, match="unknown driver 'nope'"):
        dry_run_lines(_config(tmp_path, '[run]\ndriver = "nope"\n', name="other"))
    wrong = _config(tmp_path, "", name="third", question="elsewhere")
    wrong.rename(wrong.parent.parent / "q" / "third.toml")
    with pytest.raises(UserError, match="must sit in its question's folder"):
        load_config(wrong.parent.parent / "q" / "third.toml")
    with pytest.raises(UserError, match="no \\[run\\] table"):
        dry_run_lines(_config(tmp_path, "", name="record-only"))


def test_step_lists_loop_fill_and_record():
    ex = DryRunExecutor()
    ex.outputs["hil"] = {"success": 0.5, "steps": 10}
    steps = [{"foreach": {"S": [0, 1]}, "cells": [{"C": "weak", "B": "runs/x/seed{S}/weak"},
                                                  {"C": "m1", "B": "runs/s/seed{S}/m1"}],
              "command": "edgerl hil --bundle {B} --seed 200{S} --json '{{\"a\": 1}}'",
              "record": {"fields": ["success"], "seed": "{S}", "cell": "{C}"}},
             {"foreach": {"S": [0]}, "command": "edgerl finetune --out o{S}", "background": True}]
    rows = run_steps(ex, steps, {})
    assert ex.lines[0] == """edgerl hil --bundle runs/x/seed0/weak --seed 2000 --json '{"a": 1}'"""
    assert ex.lines[3].startswith("edgerl hil --bundle runs/s/seed1/m1 --seed 2001")
    assert ex.lines[4] == "edgerl finetune --out o0 &"
    assert rows[3] == {"seed": 1, "cell": "m1", "metric": "success", "value": 0.5}
    assert resolve({"A": "{B}/x", "B": "y"})["A"] == "y/x"


def test_a_dry_run_believes_what_a_copy_or_command_made():
    ex = DryRunExecutor()
    ex.copy(["runs/a/round0", "runs/a/round1"], "runs/b/rlif/")
    ex.run(["edgerl", "finetune", "--out", "runs/b/bc", "--json"], json_out=True)
    assert ex.exists("runs/b/rlif/round1/round.json") and ex.exists("runs/b/bc/manifest.json")
    assert not ex.exists("runs/b/rlif/round2")
    assert ex.lines[0] == "cp -r runs/a/round0 runs/a/round1 runs/b/rlif/"
    assert render(["python", "-c", "a\nb"], nice=15, stdout="o.txt") == (
        "nice -n 15 python -c 'a\\nb' > o.txt")


def test_a_parallel_chain_runs_one_process_a_seed():
    lines = dry_run_lines(ROOT / "experiments" / "rlif" /
                          "rlif-region-flip-greedy-five-rounds.toml", ROOT)
    lanes = [line for line in lines if line.startswith("# seed")]
    assert lanes == [f"# seed {s}: its own process (edgerl experiment run CONFIG --lane {s})"
                     for s in (0, 1, 2)]
    # rounds 0-2 are copied in and reused: only rounds 3 and 4 collect
    collects = [line for line in lines if "--operator" in line]
    assert len(collects) == 6 and all("seed=3" in c or "seed=4" in c for c in collects)


def test_results_files_of_the_store_are_read_by_name():
    store = load_store(ROOT / "experiments")
    names = {e.name for e in store.experiments}
    assert all(r.experiment in names for r in store.results)
    for e in store.experiments:
        for table in store.tables_of(e.name):
            assert "{{table:" + table + "}}" in store.notes(e), (e.name, table)
    for r in store.results:
        assert json.loads(r.path.read_text())["question"] == r.path.parent.parent.name


def test_one_seed_s_process_runs_that_seed_only_and_writes_no_results():
    """``--lane S``: the child process of a parallel chain, after the parent copied the starts
    in (the child assumes them, and does not copy again)."""
    config = ROOT / "experiments" / "rlif" / "rlif-region-flip-screened-operator.toml"
    ex = DryRunExecutor(root=ROOT)
    assert run_experiment(config, root=ROOT, lane=1, executor=ex, argv=[]) == []
    assert not any(line.startswith("cp ") for line in ex.lines)
    assert all("seed0" not in line and "seed2" not in line for line in ex.lines)
    assert ex.lines[-1].startswith("edgerl hil --bundle runs/rlif_base_bundle --episodes 20 "
                                   "--seed 1001")
