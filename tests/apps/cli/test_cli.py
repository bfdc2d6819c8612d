"""The ``edgerl`` CLI: help, version, tasks listing, usage errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from edgerl.apps.cli import VERBS, main
from edgerl.contract import __version__


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgerl.apps", *args], capture_output=True,
                          text=True, timeout=120)


def test_help_lists_every_verb():
    res = run_cli("--help")
    assert res.returncode == 0
    for verb in VERBS:
        assert verb in res.stdout


def test_version():
    res = run_cli("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"edgerl {__version__}"


def test_tasks_json_schema(capsys):
    assert main(["tasks", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert isinstance(rows, list)
    for row in rows:
        assert set(row) == {"name", "backend", "obs_dim", "action_dim", "control_hz",
                            "description"}
        assert isinstance(row["obs_dim"], int) and row["obs_dim"] > 0
        assert isinstance(row["action_dim"], int) and row["action_dim"] > 0
        assert row["control_hz"] > 0


@pytest.mark.parametrize("argv", [["nosuchverb"], ["tasks", "--nosuchflag"], [],
                                  ["--log-level", "LOUD", "tasks"]])
def test_usage_errors_exit_2(argv):
    res = run_cli(*argv)
    assert res.returncode == 2
    assert "usage: edgerl" in res.stderr
