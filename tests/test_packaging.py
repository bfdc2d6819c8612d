"""The wheel: built from the repo, installed into a clean venv with only [runtime], it imports
every sub-package, runs the CLI, and has no torch."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYER_FOLDERS = ("contract", "sim", "runtime", "policies", "export", "hil", "bench", "apps")


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600,
                         **kw)
    assert res.returncode == 0, f"{cmd} failed:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    return res


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", ROOT, "--no-deps", "--no-build-isolation",
         "-w", out, "-q"])
    wheels = list(out.glob("edgerl-*.whl"))
    assert len(wheels) == 1
    return wheels[0]


def test_wheel_contains_every_subpackage(wheel):
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    for folder in LAYER_FOLDERS:
        pkg = f"edgerl/{folder}"
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.relative_to(ROOT / folder).as_posix()
            assert f"{pkg}/{rel}" in names, f"{folder}/{rel} is missing from the wheel"


@pytest.mark.slow
def test_runtime_only_install_imports_without_torch(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    run([py, "-m", "pip", "install", "-q", "-c", ROOT / "constraints.txt", f"{wheel}[runtime]"])
    code = (
        "import importlib.util, pkgutil, importlib\n"
        "assert importlib.util.find_spec('torch') is None, 'torch must not be installed'\n"
        "import edgerl.contract, edgerl.runtime, edgerl.sim, edgerl.policies, edgerl.export\n"
        "import edgerl.runtime as r\n"
        "for m in pkgutil.walk_packages(r.__path__, 'edgerl.runtime.'):\n"
        "    importlib.import_module(m.name)\n"
        "import onnxruntime, serial\n"
        "print(edgerl.contract.__version__)\n"
    )
    res = run([py, "-c", code], cwd=tmp_path)
    from edgerl.contract import __version__

    assert res.stdout.strip() == __version__
    # From the checkout's root (the current folder comes first on sys.path): no folder there
    # shadows the installed package.
    where = "import edgerl.runtime, edgerl.contract; print(edgerl.runtime.__file__)\n"
    res = run([py, "-c", where], cwd=ROOT)
    assert Path(res.stdout.strip()).is_relative_to(env_dir), res.stdout
    res = run([env_dir / "bin" / "edgerl", "--help"], cwd=tmp_path)
    assert "tasks" in res.stdout
