"""The ament_python package is well-formed (colcon is not installed here): package.xml,
setup.py entry points, the installed scripts' shebang, the launch file and the parameter
YAML."""

from __future__ import annotations

import ast
import configparser
import importlib
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "ros2_ws" / "src" / "edgerl_ros"
EXECUTABLES = {"edit_policy_node", "planner_node", "sim_robot_node", "serial_bridge_node",
               "ros2_control_bridge_node", "robot_edit_container"}


def _setup_kwargs() -> dict:
    """The literal ``NODES`` dict of setup.py, read without running setup.py."""
    tree = ast.parse((PKG / "setup.py").read_text())
    nodes = next(n for n in tree.body if isinstance(n, ast.Assign)
                 and getattr(n.targets[0], "id", "") == "NODES")
    return {"NODES": ast.literal_eval(nodes.value)}


class TestPackageXml:
    def test_format3_with_ament_python_and_runtime_deps(self):
        root = ET.parse(PKG / "package.xml").getroot()
        assert root.tag == "package" and root.get("format") == "3"
        assert root.findtext("name") == "edgerl_ros"
        assert root.find("export/build_type").text == "ament_python"
        deps = {e.text for e in root.iter("exec_depend")}
        assert {"rclpy", "sensor_msgs", "trajectory_msgs", "diagnostic_msgs", "std_msgs",
                "lifecycle_msgs", "rcl_interfaces", "python3-serial",
                "python3-yaml"} <= deps
        for tag in ("version", "description", "maintainer", "license"):
            assert root.findtext(tag), tag

    def test_ament_resource_marker_exists(self):
        assert (PKG / "resource" / "edgerl_ros").is_file()
        assert "script_dir=$base/lib/edgerl_ros" in (PKG / "setup.cfg").read_text()


class TestEntryPoints:
    def test_every_console_script_is_an_importable_function(self):
        nodes = _setup_kwargs()["NODES"]
        assert set(nodes) == EXECUTABLES
        for name, target in nodes.items():
            module_name, _, func = target.partition(":")
            module = importlib.import_module(module_name)
            assert callable(getattr(module, func)), name

    def test_node_modules_match_setup(self):
        from edgerl_ros.executables import CONTAINERS, NODE_MODULES

        nodes = _setup_kwargs()["NODES"]

        targets = {k: v.split(":")[0] for k, v in nodes.items()}
        assert {k: v for k, v in targets.items() if k in NODE_MODULES} == NODE_MODULES
        # each container's module is an installed executable (the robot node is its argument)
        assert {mod for mod, _nodes in CONTAINERS.values()} <= set(targets.values())


class TestScriptShebang:
    """colcon runs ``setup.py`` with its own interpreter (apt's colcon: ``/usr/bin/python3``);
    the node executables must start under the python3 of the environment they run in (the
    venv with edgerl and onnxruntime-gpu), so setup.cfg sets ``#!/usr/bin/env python3``."""

    def test_setup_cfg_sets_an_env_shebang(self):
        cfg = configparser.ConfigParser()
        cfg.read(PKG / "setup.cfg")
        assert cfg.get("build_scripts", "executable") == "/usr/bin/env python3"
        assert cfg.get("develop", "script_dir") == "$base/lib/edgerl_ros"
        assert cfg.get("install", "install_scripts") == "$base/lib/edgerl_ros"

    def test_colcon_install_writes_env_shebangs(self, tmp_path):
        """The command colcon's (non-symlink) ament_python build runs, on a copy of the
        package: every console script lands in lib/edgerl_ros with ``#!/usr/bin/env python3``
        (without the setting it would be this test's interpreter path)."""
        pytest.importorskip("setuptools")
        src = tmp_path / "edgerl_ros"
        shutil.copytree(PKG, src, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__",
                                                                 "build"))
        build, prefix = tmp_path / "build", tmp_path / "install"
        build.mkdir()
        proc = subprocess.run(
            [sys.executable, "setup.py", "egg_info", "--egg-base", str(build),
             "build", "--build-base", str(build / "build"),
             "install", "--prefix", str(prefix), "--record", str(build / "install.log"),
             "--single-version-externally-managed"],
            cwd=src, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        scripts = prefix / "lib" / "edgerl_ros"
        assert {p.name for p in scripts.iterdir()} == EXECUTABLES
        for name in EXECUTABLES:
            first = (scripts / name).read_text().splitlines()[0]
            assert first == "#!/usr/bin/env python3", (name, first)


class TestLaunchFile:
    """Structure only (``launch`` is not installable here); what the launch file declares and
    starts is checked against the graph description in test_launch_description.py."""

    def test_imports_launch_only_at_launch_time_and_uses_the_description(self):
        tree = ast.parse((PKG / "launch" / "edgerl.launch.py").read_text())
        funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert "generate_launch_description" in funcs
        top = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
        top |= {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
        assert top <= {"__future__", "pathlib"}  # importable without launch / launch_ros
        inner: dict[str, set[str]] = {}
        for f in funcs.values():
            for n in ast.walk(f):
                if isinstance(n, ast.ImportFrom):
                    inner.setdefault(n.module, set()).update(a.name for a in n.names)
        assert {"DeclareLaunchArgument", "OpaqueFunction"} <= inner["launch.actions"]
        assert inner["launch_ros.actions"] == {"LifecycleNode", "Node"}
        assert inner["edgerl_ros.graph_description"] >= {"LAUNCH_ARGUMENTS", "describe_launch",
                                                         "launch_actions"}
        # no hand-written node or argument list beside the description's
        literals = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                    and isinstance(n.value, str)}
        assert not literals & {"sim_robot_node", "planner_node", "cartpole", "robot"}


class TestParamsYaml:
    def test_default_yaml_validates(self):
        from edgerl_ros.graph import DEFAULT_CONFIG, load_params_yaml

        params = load_params_yaml(DEFAULT_CONFIG)
        assert set(params) == {"edit_policy_node", "planner_node", "sim_robot_node",
                               "ros2_control_bridge_node"}
        assert params["edit_policy_node"]["stale_policy"] == "escalate"
        assert params["sim_robot_node"]["command_timeout_s"] == 0.5

    @pytest.mark.parametrize("body, needle", [
        ("edit_policy_node:\n  ros__parameters:\n    stale_policy: explode\n", "stale_policy"),
        ("edit_policy_node:\n  ros__parameters:\n    rate_hz: -5.0\n", "below the minimum"),
        ("edit_policy_node:\n  ros__parameters:\n    no_such: 1\n", "unknown parameter"),
        ("nobody_node:\n  ros__parameters: {}\n", "unknown node"),
        ("planner_node:\n  ros__parameters:\n    period_s: fast\n", "expected float"),
        ("planner_node: [1, 2\n", "cannot read"),
    ])
    def test_bad_yaml_is_rejected_with_the_reason(self, tmp_path, body, needle):
        from edgerl_ros.graph import DeployError, load_params_yaml

        path = tmp_path / "p.yaml"
        path.write_text(body)
        with pytest.raises(DeployError, match=needle):
            load_params_yaml(path)

    def test_ints_become_floats_and_ros_args_keep_types(self, tmp_path):
        from edgerl_ros.graph import load_params_yaml, to_ros_args

        path = tmp_path / "p.yaml"
        path.write_text("sim_robot_node:\n  ros__parameters:\n    rate_hz: 100\n"
                        "    publish_expert: false\n    task: cartpole\n")
        params = load_params_yaml(path)["sim_robot_node"]
        assert params["rate_hz"] == 100.0 and isinstance(params["rate_hz"], float)
        args = to_ros_args("sim_robot_node", params)
        assert args[:3] == ["--ros-args", "-r", "__node:=sim_robot_node"]
        assert "rate_hz:=100.0" in args and "publish_expert:=false" in args
        assert "task:='cartpole'" in args
