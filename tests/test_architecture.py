"""The layered import contract, checked over every module (function-level imports included).

Layers, bottom to top (``LAYERS`` is the one table; docs/architecture.md draws it):

* contract  ``edgerl/*.py``, ``edgerl/wire/``: numpy only at module level
* sim       ``sim/``      -> contract
* runtime   ``runtime/``  -> contract (what the device installs: no torch, simulators, ROS)
* policies  ``policies/`` -> contract, sim, runtime
* export    ``export/``   -> contract, sim, runtime, policies
* hil       ``edgerl/hil/`` and ros ``ros2_ws/`` (nodes over runtime): peers above those
* demo      ``edgerl/demo/`` (and ``edgerl/soak/``): every layer above but the CLI
* cli       ``edgerl/cli/``, ``edgerl/__main__.py``: the top; nothing imports it

An import is ``import x``, ``from x import y``, a relative import, or a string naming an
existing edgerl module (registries such as ``"edgerl.sim.tasks.arm:make_arm_reach"`` and
``importlib.import_module`` arguments). tests/, benchmarks/ and tools/ sit above everything.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = {"torch", "mujoco", "mujoco_warp", "rsl_rl", "tensordict", "gymnasium", "rclpy",
         "onnx", "onnxscript", "tensorrt"}


@dataclass(frozen=True)
class Layer:
    """One layer: where its files are, the import prefix they go by, what they may import."""

    name: str
    paths: tuple[str, ...]       # folders, files or ``dir/*.py`` relative to the repo root
    modules: tuple[str, ...]     # dotted prefixes other modules import it by
    may_import: frozenset[str]   # layers below it (its own layer is always allowed)


_BELOW_TOP = frozenset({"contract", "sim", "runtime", "policies", "export"})
LAYERS: tuple[Layer, ...] = (
    Layer("contract", ("edgerl/*.py", "edgerl/wire"), ("edgerl",), frozenset()),
    Layer("sim", ("sim",), ("edgerl.sim",), frozenset({"contract"})),
    Layer("runtime", ("runtime",), ("edgerl.runtime",), frozenset({"contract"})),
    Layer("policies", ("policies",), ("edgerl.policies",),
          frozenset({"contract", "sim", "runtime"})),
    Layer("export", ("export",), ("edgerl.export",),
          frozenset({"contract", "sim", "runtime", "policies"})),
    Layer("hil", ("edgerl/hil",), ("edgerl.hil",), _BELOW_TOP),
    Layer("ros", ("ros2_ws",), ("edgerl_ros",), frozenset({"contract", "runtime"})),
    Layer("demo", ("edgerl/demo",), ("edgerl.demo",), _BELOW_TOP | {"hil", "ros"}),
    Layer("soak", ("edgerl/soak",), ("edgerl.soak",), _BELOW_TOP | {"hil", "ros"}),
    Layer("cli", ("edgerl/cli", "edgerl/__main__.py"), ("edgerl.cli",),
          _BELOW_TOP | {"hil", "ros", "demo", "soak"}),
)
BY_NAME = {layer.name: layer for layer in LAYERS}
ROS_PKG = "ros2_ws/src/edgerl_ros/edgerl_ros"
#: (file, layer it may import although its own layer may not): the reason
EXCEPTIONS: dict[tuple[str, str], str] = {
    (f"{ROS_PKG}/sim_robot_node.py", "sim"): "the simulated robot is the plant: it steps a "
                                             "sim task (inside the node, never on a robot)",
}
#: import prefix -> folder holding its files
_FOLDERS = {"edgerl.sim": "sim", "edgerl.policies": "policies", "edgerl.export": "export",
            "edgerl.runtime": "runtime", "edgerl_ros": ROS_PKG, "edgerl": "edgerl"}
_MODULE_STRING = re.compile(r"(edgerl(?:_ros)?(?:\.\w+)*)(?::\w+)?")


def _longest(candidates: list[tuple[str, str]], key: str, sep: str) -> str | None:
    hits = [(len(p), name) for p, name in candidates
            if key == p or key.startswith(p + sep)
            or ("*" in p and key.count(sep) == p.count(sep) and fnmatch.fnmatchcase(key, p))]
    return max(hits)[1] if hits else None


def layer_of_file(rel: str) -> str | None:
    """The layer of a repo-relative path (longest matching entry wins), None in no layer."""
    return _longest([(p, lay.name) for lay in LAYERS for p in lay.paths], rel, "/")


def layer_of_module(module: str) -> str | None:
    """The layer of a dotted module name, None for anything not edgerl's."""
    return _longest([(m, lay.name) for lay in LAYERS for m in lay.modules], module, ".")


def module_of_file(rel: str) -> str:
    """The dotted name ``rel`` is imported as (``sim/bench.py`` -> ``edgerl.sim.bench``);
    "" for a file no one imports (``ros2_ws/src/edgerl_ros/setup.py``)."""
    hits = [(len(f), p, f) for p, f in _FOLDERS.items() if rel.startswith(f + "/")]
    if not hits:
        return ""
    _, prefix, folder = max(hits)
    parts = [prefix, *Path(rel[len(folder) + 1:]).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_exists(module: str) -> bool:
    """Whether ``module`` names a file or package of this repository."""
    prefix = _longest([(p, p) for p in _FOLDERS], module, ".")
    if prefix is None:
        return False
    rest = module[len(prefix) + 1:].split(".") if module != prefix else []
    base = ROOT / _FOLDERS[prefix] / Path(*rest) if rest else ROOT / _FOLDERS[prefix]
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


@dataclass(frozen=True)
class Import:
    line: int
    module: str
    top_level: bool  # runs when the module is imported (not inside a function)


class _Imports(ast.NodeVisitor):
    def __init__(self, package: str) -> None:
        self.package, self.depth, self.found = package, 0, []

    def _add(self, node: ast.AST, module: str) -> None:
        self.found.append(Import(node.lineno, module, self.depth == 0))

    def visit_FunctionDef(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0:
            self._add(node, node.module or "")
            return
        base = self.package.split(".")
        base = base[:len(base) - (node.level - 1)]
        self._add(node, ".".join(base + ([node.module] if node.module else [])))

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            match = _MODULE_STRING.fullmatch(node.value)
            if match and module_exists(match.group(1)):
                self._add(node, match.group(1))


def imports_of(source: str, rel: str) -> list[Import]:
    """Every import in ``source`` (the text of repo file ``rel``), at any depth."""
    module = module_of_file(rel)
    package = module if rel.endswith("__init__.py") else module.rpartition(".")[0]
    visitor = _Imports(package)
    visitor.visit(ast.parse(source, filename=rel))
    return visitor.found


def check_source(source: str, rel: str) -> list[str]:
    """Layer violations of ``source`` read as repo file ``rel``: one line each."""
    own = layer_of_file(rel)
    if own is None:
        return []
    out = []
    for imp in imports_of(source, rel):
        target = layer_of_module(imp.module)
        if target is None or target == own or target in BY_NAME[own].may_import:
            continue
        if (rel, target) not in EXCEPTIONS:
            out.append(f"{rel}:{imp.line} ({own}) imports {imp.module} ({target})")
    return out


SOURCE_FOLDERS = ("edgerl", "sim", "runtime", "policies", "export", "ros2_ws")


def source_files() -> list[str]:
    """Every Python file of the source tree (tests/, benchmarks/, tools/ excluded)."""
    files = {f.relative_to(ROOT).as_posix() for d in SOURCE_FOLDERS
             for f in (ROOT / d).rglob("*.py")}
    return sorted(f for f in files if "/build/" not in f and "/install/" not in f)


def layered_files() -> list[str]:
    """The source files that belong to a layer, repo-relative."""
    return [f for f in source_files() if layer_of_file(f)]


def heavy_imports(rel: str, *, top_level_only: bool = False) -> set[str]:
    """Top-level packages out of HEAVY that ``rel`` imports (anywhere, or at module level)."""
    found = imports_of((ROOT / rel).read_text(), rel)
    return {i.module.split(".")[0] for i in found if not top_level_only or i.top_level} & HEAVY


# --- the contract --------------------------------------------------------------------------
def test_every_source_file_is_in_a_layer():
    """A new folder (``edgerl/soak/``) gets its row in LAYERS, not the contract's rules."""
    assert [f for f in source_files() if layer_of_file(f) is None] == []
    present = {layer_of_file(f) for f in source_files()}
    assert {"contract", "sim", "runtime", "policies", "export", "hil", "ros", "demo",
            "cli"} <= present
    assert layer_of_file("edgerl/newpkg/x.py") is None
    assert layer_of_file("edgerl/spec.py") == layer_of_file("edgerl/wire/codec.py") == "contract"


def test_every_module_keeps_to_its_layer():
    files = layered_files()
    assert len(files) > 100, files
    violations = [v for f in files for v in check_source((ROOT / f).read_text(), f)]
    assert violations == []


@pytest.mark.parametrize(("source", "rel", "expected"), [
    ("from edgerl.cli.output import print_table\n", "sim/bench.py",
     "sim/bench.py:1 (sim) imports edgerl.cli.output (cli)"),
    ("def f():\n    import edgerl.policies.runs\n", "sim/wrappers/latency.py",
     "sim/wrappers/latency.py:2 (sim) imports edgerl.policies.runs (policies)"),
    ("def f():\n    from edgerl.policies import runs\n", "runtime/edit_loop.py",
     "runtime/edit_loop.py:2 (runtime) imports edgerl.policies (policies)"),
    ("from ..cli import CliError\n", "edgerl/demo/report.py",
     "edgerl/demo/report.py:1 (demo) imports edgerl.cli (cli)"),
    ("from ..sim import registry\n", "export/bundle.py", None),
    ("PLAN = 'edgerl.sim.registry:make_task'\n", "edgerl/spec.py",
     "edgerl/spec.py:1 (contract) imports edgerl.sim.registry (sim)"),
    ("import edgerl_ros.graph\n", "edgerl/hil/harness.py",
     "edgerl/hil/harness.py:1 (hil) imports edgerl_ros.graph (ros)"),
    ("from edgerl.sim.registry import make_task\n", f"{ROS_PKG}/planner_node.py",
     f"{ROS_PKG}/planner_node.py:1 (ros) imports edgerl.sim.registry (sim)"),
    ("from edgerl.sim.registry import make_task\n", f"{ROS_PKG}/sim_robot_node.py", None),
    ("import edgerl.hil.harness\n", "edgerl/demo/pipeline.py", None),
])
def test_checker_reports_a_wrong_import(source, rel, expected):
    """The contract test cannot pass silently: a wrong import (module level, inside a
    function, relative, or a registry string) attributed to a real file is reported."""
    assert check_source(source, rel) == ([expected] if expected else [])


def test_checker_resolves_relative_imports():
    found = imports_of("from .latency import LatencyWrapper\nfrom .. import registry\n",
                       "sim/wrappers/__init__.py")
    assert [i.module for i in found] == ["edgerl.sim.wrappers.latency", "edgerl.sim"]
    assert module_of_file("sim/wrappers/latency.py") == "edgerl.sim.wrappers.latency"
    assert module_of_file(f"{ROS_PKG}/graph.py") == "edgerl_ros.graph"
    assert layer_of_module("edgerl.wire.codec") == "contract"
    assert layer_of_module("edgerl.cli") == "cli" and layer_of_module("numpy") is None


# --- heavy dependencies --------------------------------------------------------------------
def test_runtime_imports_nothing_heavy():
    """One exception: runtime/trt_engine.py runs the exported policy.engine with the system
    TensorRT (JetPack), importing ``tensorrt`` only inside functions (optional)."""
    files = [f for f in layered_files() if layer_of_file(f) == "runtime"]
    assert files, "runtime/ has no modules"
    heavy = {f: heavy_imports(f) for f in files if heavy_imports(f)}
    assert heavy == {"runtime/trt_engine.py": {"tensorrt"}}
    assert heavy_imports("runtime/trt_engine.py", top_level_only=True) == set()


def test_contract_imports_nothing_heavy():
    """The contract modules import numpy only at module level; edit_obs touches torch only
    inside functions, when it is handed a torch tensor."""
    files = [f for f in layered_files() if layer_of_file(f) == "contract"]
    assert "edgerl/wire/codec.py" in files and "edgerl/spec.py" in files
    assert {f: heavy_imports(f, top_level_only=True) for f in files
            if heavy_imports(f, top_level_only=True)} == {}


def test_ros_nodes_import_no_torch_or_simulator():
    """The nodes need rclpy only; the simulated robot (the plant) loads torch when it runs."""
    files = [f for f in layered_files() if layer_of_file(f) == "ros"]
    heavy = {f: heavy_imports(f) - {"rclpy"} for f in files if heavy_imports(f) - {"rclpy"}}
    assert set(heavy) <= {f"{ROS_PKG}/sim_robot_node.py"}, heavy
    assert heavy_imports(f"{ROS_PKG}/sim_robot_node.py", top_level_only=True) <= {"rclpy"}


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
    assert int(res.stdout.strip()) > 10


@pytest.mark.parametrize("folder", ["sim", "policies", "export", "runtime"])
def test_subpackage_maps_to_folder(folder):
    import importlib

    module = importlib.import_module(f"edgerl.{folder}")
    assert Path(module.__file__).resolve().parent == ROOT / folder
