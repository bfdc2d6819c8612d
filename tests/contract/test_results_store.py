"""The results format: the writer fills provenance, the reader refuses what lacks a field."""

from __future__ import annotations

import json
import os

import pytest

from edgerl.contract.results_store import (
    FORMAT,
    VERSION,
    Provenance,
    ResultsFormatError,
    git_commit,
    iter_results,
    read_results,
    relative_command,
    write_results,
)

PROV = Provenance(command="edgerl experiment run x.toml", commit="a" * 40,
                  date="2026-12-05T14:19:16Z", machine={"cpu_count": 2, "load_average": [0.4]})


def _write(tmp_path, rows=None, **kw):
    path = tmp_path / "q" / "results" / "exp.json"
    write_results(path, experiment="exp-name", question="q", config={"run": {"driver": "x"}},
                  seeds=[2, 0, 1, 0], rows=rows or [{"method": "rlif", "seed": 0,
                                                     "metric": "success", "value": 0.7}],
                  provenance=kw.pop("provenance", PROV), **kw)
    return path


def test_written_file_reads_back_with_its_provenance(tmp_path):
    path = _write(tmp_path, notes="migrated")
    doc = read_results(path)
    assert (doc.experiment, doc.question, doc.seeds) == ("exp-name", "q", [0, 1, 2])
    assert doc.command == "edgerl experiment run x.toml" and doc.commit == "a" * 40
    assert doc.date == "2026-12-05T14:19:16Z" and doc.notes == "migrated"
    assert doc.machine == {"cpu_count": 2, "load_average": [0.4]}  # as given
    assert doc.select(method="rlif", metric="success")[0]["value"] == 0.7
    raw = json.loads(path.read_text())
    assert raw["format"] == FORMAT and raw["version"] == VERSION
    assert list(raw)[:4] == ["format", "version", "experiment", "question"]
    assert iter_results(tmp_path) == [doc]


def test_the_writer_fills_provenance_itself(tmp_path):
    doc = read_results(_write(tmp_path, provenance=None))
    assert doc.command.startswith("edgerl")
    assert doc.commit == "unknown" or doc.commit[:40].isalnum()
    assert doc.date.endswith("Z") and doc.machine["cpu_count"] == os.cpu_count()
    assert doc.machine["load_average"]


@pytest.mark.parametrize("field", ["format", "version", "experiment", "question", "config",
                                   "command", "commit", "date", "seeds", "machine", "rows"])
def test_a_file_missing_a_field_is_refused_naming_file_and_field(tmp_path, field):
    path = _write(tmp_path)
    raw = json.loads(path.read_text())
    del raw[field]
    path.write_text(json.dumps(raw))
    with pytest.raises(ResultsFormatError, match=rf"exp\.json: missing field '{field}'"):
        read_results(path)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["machine"].pop("load_average"), "missing field 'machine.load_average'"),
    (lambda d: d["rows"][0].pop("value"), r"rows\[0\]: missing field 'value'"),
    (lambda d: d["rows"][0].pop("metric"), r"rows\[0\]: missing field 'metric'"),
    (lambda d: d.update(commit="HEAD"), "field 'commit' is not a git revision"),
    (lambda d: d.update(date="2026-12-05 14:19"), "field 'date' is not UTC ISO 8601"),
    (lambda d: d.update(experiment="Exp Name"), "field 'experiment' must be kebab-case"),
    (lambda d: d.update(version=2), "field 'version' is 2"),
    (lambda d: d.update(seeds=["0"]), "field 'seeds' must be a list of integers"),
    (lambda d: d["rows"][0].update(value={"a": 1}), "field 'value' must be a scalar"),
    (lambda d: d["rows"][0].update(provenance={"command": "x"}),
     r"rows\[0\]\.provenance: missing field 'commit'"),
])
def test_a_malformed_field_is_refused(tmp_path, change, message):
    path = _write(tmp_path)
    raw = json.loads(path.read_text())
    change(raw)
    path.write_text(json.dumps(raw))
    with pytest.raises(ResultsFormatError, match=message):
        read_results(path)


def test_a_row_may_carry_the_provenance_of_the_run_that_added_it(tmp_path):
    later = Provenance(command="edgerl results --tasks t", commit="b" * 40 + "-dirty",
                       date="2026-12-06T01:00:00Z", machine={"cpu_count": 2,
                                                             "load_average": None})
    rows = [{"metric": "x", "value": [1, 2.5], "provenance": later.to_dict()}]
    doc = read_results(_write(tmp_path, rows=rows))
    assert doc.rows[0]["provenance"]["commit"].endswith("-dirty")


def test_not_json_is_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{")
    with pytest.raises(ResultsFormatError, match="bad.json: not JSON"):
        read_results(path)


def test_commands_name_no_machine_paths(tmp_path):
    line = relative_command(["edgerl", "hil", "--bundle", str(tmp_path / "runs" / "b")],
                            tmp_path)
    assert line == "edgerl hil --bundle runs/b" and str(tmp_path) not in line
    assert git_commit(tmp_path) == "unknown"  # not a checkout
