"""RunExpert reads a run through the loader edgerl.policies.runs registers (sim cannot
import policies: the layered import contract)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from edgerl.sim.adapters.expert import ExpertError, RunExpert
from edgerl.sim.adapters.run_loader import run_loader, set_run_loader


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    (tmp_path / "config.json").write_text("{}")
    return tmp_path


@pytest.fixture
def restore_loader():
    saved = run_loader()
    yield
    set_run_loader(saved)


def _loaded(method: str, in_dim: int, out_dim: int) -> SimpleNamespace:
    actor = torch.nn.Linear(in_dim, out_dim)
    actor.input_dim, actor.output_dim = in_dim, out_dim
    return SimpleNamespace(config=SimpleNamespace(method=method), actor=actor, checkpoint="m.pt")


def test_without_a_loader_the_error_says_what_to_import(run_dir):
    code = ("from edgerl.sim.adapters.expert import RunExpert, ExpertError\n"
            f"e = RunExpert({str(run_dir)!r}, 3, 1)\n"
            "try:\n    e.load()\nexcept ExpertError as exc:\n    print('ERR', exc)\n"
            "import edgerl.policies.runs as r, edgerl.sim.adapters.run_loader as m\n"
            "print('REGISTERED', m.run_loader() is not None)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert "ERR expert_run" in res.stdout and "import edgerl.policies first" in res.stdout
    assert "REGISTERED True" in res.stdout


def test_the_registered_loader_is_called_once_and_checked(run_dir, restore_loader):
    calls = []
    set_run_loader(lambda d, dev: calls.append((d, dev)) or _loaded("nodelay", 3, 1))
    e = RunExpert(run_dir, obs_dim=3, action_dim=1)
    assert e(torch.zeros(4, 3)).shape == (4, 1)
    e(torch.zeros(2, 3))
    assert calls == [(run_dir, "cpu")]


@pytest.mark.parametrize(("loaded", "match"), [
    (_loaded("edit", 3, 1), "must be a 'nodelay' run"),
    (_loaded("nodelay", 5, 1), "actor maps 5 -> 1"),
])
def test_a_run_that_does_not_fit_is_refused(run_dir, restore_loader, loaded, match):
    set_run_loader(lambda d, dev: loaded)
    with pytest.raises(ExpertError, match=match):
        RunExpert(run_dir, obs_dim=3, action_dim=1).load()
