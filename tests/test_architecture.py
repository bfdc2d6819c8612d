"""The layered import contract, checked over every module (function-level imports included).

Each layer is one top-level folder, and a module's layer is read off its folder: the file
``<folder>/a/b.py`` is the module ``edgerl.<folder>.a.b`` (``setup.py`` installs every layer
folder under the ``edgerl`` namespace). Layers, bottom to top (``LAYERS`` is the one table;
docs/architecture.md draws it):

* contract  ``contract/``  numpy only at module level
* sim       ``sim/``       -> contract
* runtime   ``runtime/``   -> contract (what the device installs: no torch, simulators, ROS)
* policies  ``policies/``  -> contract, sim, runtime
* export    ``export/``    -> contract, sim, runtime, policies
* hil       ``hil/`` and ros ``ros2_ws/`` (nodes over runtime): peers above those
* bench     ``bench/``     every measuring path: every layer above but the apps
* apps      ``apps/``      CLI, demo, soak: the top; nothing imports it

An import is ``import x``, ``from x import y``, a relative import, or a string naming an
existing edgerl module (registries such as ``"edgerl.sim.tasks.arm:make_arm_reach"`` and
``importlib.import_module`` arguments). tests/ and tools/ sit above everything. Besides the
layers, no two modules may import each other, directly or through others (no cycle).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.import_graph import Import, ImportVisitor, cycles

ROOT = Path(__file__).resolve().parents[1]
HEAVY = {"torch", "mujoco", "mujoco_warp", "rsl_rl", "tensordict", "gymnasium", "rclpy",
         "onnx", "onnxscript", "tensorrt"}


@dataclass(frozen=True)
class Layer:
    """One layer: the folder its files are in, the import prefix they go by, what they may
    import."""

    name: str
    folder: str                  # the package folder, relative to the repo root
    module: str                  # the dotted prefix other modules import it by
    may_import: frozenset[str]   # layers below it (its own layer is always allowed)
    tree: str = ""               # the top folder of its files, if not ``folder`` itself

    @property
    def root(self) -> str:
        return self.tree or self.folder


_BELOW_HIL = frozenset({"contract", "sim", "runtime", "policies", "export"})
LAYERS: tuple[Layer, ...] = (
    Layer("contract", "contract", "edgerl.contract", frozenset()),
    Layer("sim", "sim", "edgerl.sim", frozenset({"contract"})),
    Layer("runtime", "runtime", "edgerl.runtime", frozenset({"contract"})),
    Layer("policies", "policies", "edgerl.policies", frozenset({"contract", "sim", "runtime"})),
    Layer("export", "export", "edgerl.export",
          frozenset({"contract", "sim", "runtime", "policies"})),
    Layer("hil", "hil", "edgerl.hil", _BELOW_HIL),
    Layer("ros", "ros2_ws/src/edgerl_ros/edgerl_ros", "edgerl_ros",
          frozenset({"contract", "runtime"}), tree="ros2_ws"),
    Layer("bench", "bench", "edgerl.bench", _BELOW_HIL | {"hil", "ros"}),
    Layer("apps", "apps", "edgerl.apps", _BELOW_HIL | {"hil", "ros", "bench"}),
)
BY_NAME = {layer.name: layer for layer in LAYERS}
ROS_PKG = BY_NAME["ros"].folder
#: (file, layer it may import although its own layer may not): the reason
EXCEPTIONS: dict[tuple[str, str], str] = {
    (f"{ROS_PKG}/sim_robot_node.py", "sim"): "the simulated robot is the plant: it steps a "
                                             "sim task (inside the node, never on a robot)",
}
#: inside the apps: the CLI is the top; the demo and the soak test are libraries it runs
APPS_TOP = "edgerl.apps.cli"
_MODULE_STRING = re.compile(r"(edgerl(?:_ros)?(?:\.\w+)*)(?::\w+)?")


def _under(key: str, prefix: str, sep: str) -> bool:
    return key == prefix or key.startswith(prefix + sep)


def layer_of_file(rel: str) -> str | None:
    """The layer of a repo-relative path: the layer whose folder holds it, None in no layer."""
    hits = [lay.name for lay in LAYERS if rel.startswith(lay.root + "/")]
    return hits[0] if hits else None


def layer_of_module(module: str) -> str | None:
    """The layer of a dotted module name, None for anything not edgerl's."""
    hits = [lay.name for lay in LAYERS if _under(module, lay.module, ".")]
    return hits[0] if hits else None


def module_of_file(rel: str) -> str:
    """The dotted name ``rel`` is imported as (``sim/wrappers/latency.py`` ->
    ``edgerl.sim.wrappers.latency``): the layer's prefix, then the folder path; "" for a file
    outside every layer (``ros2_ws/src/edgerl_ros/setup.py``)."""
    layer = layer_of_file(rel)
    if layer is None or not rel.startswith(BY_NAME[layer].folder + "/"):
        return ""
    lay = BY_NAME[layer]
    parts = [lay.module, *Path(rel[len(lay.folder) + 1:]).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def file_of_module(module: str) -> Path | None:
    """The file (module or package ``__init__``) of a dotted name, None if it names none."""
    layer = layer_of_module(module)
    if layer is None:
        return None
    lay = BY_NAME[layer]
    rest = module[len(lay.module) + 1:].split(".") if module != lay.module else []
    base = ROOT / lay.folder / Path(*rest) if rest else ROOT / lay.folder
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def module_exists(module: str) -> bool:
    """Whether ``module`` names a file or package of this repository."""
    return file_of_module(module) is not None


def imports_of(source: str, rel: str) -> list[Import]:
    """Every import in ``source`` (the text of repo file ``rel``), at any depth."""
    module = module_of_file(rel)
    package = module if rel.endswith("__init__.py") else module.rpartition(".")[0]
    visitor = ImportVisitor(package, module_exists, _MODULE_STRING)
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


def source_files() -> list[str]:
    """Every Python file of the source tree (tests/ and tools/ excluded)."""
    files = {f.relative_to(ROOT).as_posix() for lay in LAYERS
             for f in (ROOT / lay.root).rglob("*.py")}
    return sorted(f for f in files if "/build/" not in f and "/install/" not in f)


def layered_files() -> list[str]:
    """The source files that belong to a layer, repo-relative."""
    return [f for f in source_files() if layer_of_file(f)]


def heavy_imports(rel: str, *, top_level_only: bool = False) -> set[str]:
    """Top-level packages out of HEAVY that ``rel`` imports (anywhere, or at module level)."""
    found = imports_of((ROOT / rel).read_text(), rel)
    return {i.module.split(".")[0] for i in found if not top_level_only or i.top_level} & HEAVY


def import_graph(files: list[str]) -> dict[str, set[str]]:
    """Module -> the repository modules it imports (any depth)."""
    graph: dict[str, set[str]] = {}
    for rel in files:
        me = module_of_file(rel)
        targets = graph.setdefault(me, set())
        for imp in imports_of((ROOT / rel).read_text(), rel):
            if module_exists(imp.module) and imp.module != me:
                targets.add(imp.module)
    return graph


# --- the contract --------------------------------------------------------------------------
def test_every_source_file_is_in_a_layer():
    """A new top-level folder gets its row in LAYERS (and in setup.py), or it is not source."""
    assert [f for f in source_files() if layer_of_file(f) is None] == []
    present = {layer_of_file(f) for f in source_files()}
    assert present == set(BY_NAME)
    assert layer_of_file("newlayer/x.py") is None
    assert layer_of_file("contract/spec.py") == "contract"
    assert layer_of_file("contract/wire/codec.py") == "contract"


def test_layer_folders_are_the_installed_packages():
    """setup.py installs exactly the layer folders, each as ``edgerl.<folder>``; no folder of
    the checkout is named ``edgerl`` (it would shadow the installed namespace)."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    assigned = {node.targets[0].id: node.value for node in tree.body
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
    folders = ast.literal_eval(assigned["LAYER_FOLDERS"])
    python_layers = [lay for lay in LAYERS if lay.name != "ros"]
    assert list(folders) == [lay.folder for lay in python_layers]
    assert all(lay.module == f"edgerl.{lay.folder}" for lay in python_layers)
    assert not (ROOT / "edgerl").exists()


def test_every_module_keeps_to_its_layer():
    files = layered_files()
    assert len(files) > 100, files
    violations = [v for f in files for v in check_source((ROOT / f).read_text(), f)]
    assert violations == []


def test_the_demo_and_the_soak_test_do_not_import_the_cli():
    """Inside the apps, the CLI is the top: it runs the demo and the soak test."""
    files = [f for f in layered_files() if f.startswith(("apps/demo/", "apps/soak/"))]
    assert files
    bad = [f"{f}:{i.line} imports {i.module}" for f in files
           for i in imports_of((ROOT / f).read_text(), f) if _under(i.module, APPS_TOP, ".")]
    assert bad == []


def test_no_import_cycle():
    """No module imports itself through others (function-level imports included)."""
    assert cycles(import_graph(layered_files())) == []


def test_cycle_finder_reports_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


@pytest.mark.parametrize(("source", "rel", "expected"), [
    ("from edgerl.apps.cli.output import print_table\n", "bench/sim/throughput.py",
     "bench/sim/throughput.py:1 (bench) imports edgerl.apps.cli.output (apps)"),
    ("def f():\n    import edgerl.policies.runs\n", "sim/wrappers/latency.py",
     "sim/wrappers/latency.py:2 (sim) imports edgerl.policies.runs (policies)"),
    ("def f():\n    from edgerl.policies import runs\n", "runtime/edit_loop.py",
     "runtime/edit_loop.py:2 (runtime) imports edgerl.policies.runs (policies)"),
    ("from ..bench.count_ratio import rate_ratio_test\n", "hil/harness.py",
     "hil/harness.py:1 (hil) imports edgerl.bench.count_ratio (bench)"),
    ("from ..sim import registry\n", "export/bundle.py", None),
    ("PLAN = 'edgerl.sim.registry:make_task'\n", "contract/spec.py",
     "contract/spec.py:1 (contract) imports edgerl.sim.registry (sim)"),
    ("import edgerl_ros.graph\n", "export/bundle.py",
     "export/bundle.py:1 (export) imports edgerl_ros.graph (ros)"),
    ("from edgerl.sim.registry import make_task\n", f"{ROS_PKG}/planner_node.py",
     f"{ROS_PKG}/planner_node.py:1 (ros) imports edgerl.sim.registry (sim)"),
    ("from edgerl.sim.registry import make_task\n", f"{ROS_PKG}/sim_robot_node.py", None),
    ("import edgerl.hil.harness\n", "apps/demo/pipeline.py", None),
    ("import edgerl.hil.harness\n", "bench/hil/rt_ratio.py", None),
    ("ARGV = [sys.executable, '-m', 'edgerl.apps', 'bench']\n", "bench/child_json.py", None),
    ("ARGV = ['edgerl.apps', 'bench']\n", "bench/child_json.py",
     "bench/child_json.py:1 (bench) imports edgerl.apps (apps)"),
    ("import edgerl.apps.demo.report\n", "bench/hil/rt_ratio.py",
     "bench/hil/rt_ratio.py:1 (bench) imports edgerl.apps.demo.report (apps)"),
])
def test_checker_reports_a_wrong_import(source, rel, expected):
    """The contract test cannot pass silently: a wrong import (module level, inside a
    function, relative, or a registry string) attributed to a real file is reported."""
    assert check_source(source, rel) == ([expected] if expected else [])


def test_checker_resolves_relative_imports():
    found = imports_of("from .latency import LatencyWrapper\nfrom .. import registry\n",
                       "sim/wrappers/__init__.py")
    assert [i.module for i in found] == ["edgerl.sim.wrappers.latency", "edgerl.sim.registry"]
    assert module_of_file("sim/wrappers/latency.py") == "edgerl.sim.wrappers.latency"
    assert module_of_file("contract/__init__.py") == "edgerl.contract"
    assert module_of_file(f"{ROS_PKG}/graph.py") == "edgerl_ros.graph"
    assert layer_of_module("edgerl.contract.wire.codec") == "contract"
    assert layer_of_module("edgerl.apps.cli") == "apps" and layer_of_module("numpy") is None
    assert layer_of_module("edgerl") is None


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
    assert "contract/wire/codec.py" in files and "contract/spec.py" in files
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


@pytest.mark.parametrize("layer", [lay for lay in LAYERS if lay.name != "ros"],
                         ids=lambda lay: lay.name)
def test_layer_package_maps_to_its_folder(layer):
    import importlib

    module = importlib.import_module(layer.module)
    assert Path(module.__file__).resolve().parent == ROOT / layer.folder
