"""Dependency direction: runtime/ (what the device installs) never imports torch, simulators,
training code or ROS; the contract (edgerl/*.py) needs numpy only."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = {"torch", "mujoco", "mujoco_warp", "rsl_rl", "tensordict", "gymnasium", "rclpy",
         "onnx", "onnxscript", "tensorrt"}
FORBIDDEN_IN_RUNTIME = HEAVY | {"edgerl.sim", "edgerl.policies", "edgerl.export"}


def imported_modules(path: Path, *, top_level_only: bool = False) -> set[str]:
    """Modules imported anywhere in the file (or only at module level)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def violations(files: list[Path], forbidden: set[str], *,
               top_level_only: bool = False) -> list[str]:
    out = []
    for f in files:
        for name in imported_modules(f, top_level_only=top_level_only):
            if any(name == bad or name.startswith(bad + ".") for bad in forbidden):
                out.append(f"{f.relative_to(ROOT)} imports {name}")
    return out


def test_runtime_imports_nothing_heavy():
    """One exception: runtime/trt_engine.py runs the exported policy.engine with the system
    TensorRT (JetPack), importing ``tensorrt`` only inside functions (optional)."""
    files = sorted((ROOT / "runtime").rglob("*.py"))
    assert files, "runtime/ has no modules"
    engine = ROOT / "runtime" / "trt_engine.py"
    assert violations([f for f in files if f != engine], FORBIDDEN_IN_RUNTIME) == []
    assert violations([engine], FORBIDDEN_IN_RUNTIME - {"tensorrt"}) == []
    assert violations([engine], {"tensorrt"}, top_level_only=True) == []


def test_contract_imports_nothing_heavy():
    """The contract modules import numpy only at module level; edit_obs touches torch only
    inside functions, when it is handed a torch tensor."""
    files = sorted((ROOT / "edgerl").glob("*.py"))  # the contract modules, not cli/ or hil/
    forbidden = HEAVY | {"edgerl.sim", "edgerl.policies", "edgerl.export", "edgerl.runtime"}
    assert violations(files, forbidden, top_level_only=True) == []


def test_runtime_imports_with_torch_hidden():
    """Import every runtime module in a subprocess where torch & simulators cannot load."""
    code = (
        "import sys, pkgutil, importlib\n"
        f"for m in {sorted(HEAVY)!r}: sys.modules[m] = None\n"
        "import edgerl.runtime as r\n"
        "names = [m.name for m in pkgutil.walk_packages(r.__path__, 'edgerl.runtime.')]\n"
        "for n in names: importlib.import_module(n)\n"
        "print(len(names))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("folder", ["sim", "policies", "export", "runtime"])
def test_subpackage_maps_to_folder(folder):
    import importlib

    module = importlib.import_module(f"edgerl.{folder}")
    assert Path(module.__file__).resolve().parent == ROOT / folder
