"""``edgerl[runtime-gpu]`` beside an installed ``onnxruntime-gpu``: pip keeps the GPU build
and installs no CPU ``onnxruntime`` over it (both ship the ``onnxruntime`` module); on
aarch64 (Jetson) the extra asks for no onnxruntime distribution at all.

The installed GPU build is a stub distribution (dist-info only) on ``PYTHONPATH``; pip runs
offline (``--no-index``, no config, no find-links) in ``--dry-run`` mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _dry_run(tmp_path: Path, stub: Path | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    if stub is not None:
        env["PYTHONPATH"] = str(stub)
    return subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index",
         "--no-build-isolation", "--quiet", "--report", str(tmp_path / "report.json"),
         "-e", f"{ROOT}[runtime-gpu]"], env=env, capture_output=True, text=True, timeout=180,
        cwd=tmp_path)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the x86_64 marker branch")
def test_runtime_gpu_keeps_an_installed_onnxruntime_gpu(tmp_path):
    stub = tmp_path / "site"
    dist = stub / "onnxruntime_gpu-1.23.2.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: onnxruntime-gpu\n"
                                   "Version: 1.23.2\n")
    (dist / "RECORD").write_text("")
    res = _dry_run(tmp_path, stub)
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    # only edgerl itself would be installed: onnxruntime-gpu is satisfied, no CPU onnxruntime
    assert [(i["metadata"]["name"], i.get("requested_extras")) for i in report["install"]] == \
        [("edgerl", ["runtime-gpu"])]
    # without the GPU build installed, the extra needs it (offline: unresolvable)
    res = _dry_run(tmp_path, None)
    assert res.returncode != 0
    assert "No matching distribution found for onnxruntime-gpu>=1.17" in res.stderr


def test_runtime_gpu_asks_for_no_onnxruntime_on_jetson():
    extras = _pyproject()["project"]["optional-dependencies"]
    for machine, want in (("aarch64", set()), ("x86_64", {"onnxruntime-gpu"})):
        env = {"platform_machine": machine, "extra": "runtime-gpu"}
        names = {r.name for r in map(Requirement, extras["runtime-gpu"])
                 if r.marker is None or r.marker.evaluate(env)}
        assert {n for n in names if n.startswith("onnxruntime")} == want, machine
    assert "onnxruntime>=1.17" in extras["runtime"]
