"""The ament_python package is well-formed (colcon is not installed here): package.xml,
setup.py entry points, the launch file and the parameter YAML."""

from __future__ import annotations

import ast
import importlib
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


class TestLaunchFile:
    def test_parses_and_names_the_executables(self):
        src = (PKG / "launch" / "edgerl.launch.py").read_text()
        tree = ast.parse(src)
        funcs = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert "generate_launch_description" in funcs
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and getattr(n.func, "id", "") in ("Node", "LifecycleNode")]
        execs = {kw.value.value: n.func.id for n in calls for kw in n.keywords
                 if kw.arg == "executable"}
        assert execs == {"sim_robot_node": "Node", "serial_bridge_node": "Node",
                         "ros2_control_bridge_node": "Node", "planner_node": "Node",
                         "edit_policy_node": "LifecycleNode"}
        imports = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
        assert {"launch", "launch_ros.actions"} <= imports

    def test_robot_argument_picks_the_robot_node(self):
        """robot:=sim starts sim_robot_node, robot:=serial serial_bridge_node (with port and
        baud), robot:=ros neither; device reaches the planner and the edit policy."""
        tree = ast.parse((PKG / "launch" / "edgerl.launch.py").read_text())
        args = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "DeclareLaunchArgument":
                kw = {k.arg: k.value for k in n.keywords}
                args[n.args[0].value] = (
                    getattr(kw.get("default_value"), "value", None),
                    [e.value for e in kw["choices"].elts] if "choices" in kw else None)
        assert args["robot"] == ("sim", ["sim", "serial", "ros2_control", "ros"])
        assert args["port"][0] == "/dev/ttyACM0" and args["baud"][0] == "1000000"
        assert args["device"] == ("auto", ["auto", "cpu", "cuda", "tensorrt"])
        conds = {}
        params = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("Node", "LifecycleNode"):
                kw = {k.arg: k.value for k in n.keywords}
                exe = kw["executable"].value
                c = kw.get("condition")
                conds[exe] = (c.func.id, [a.value for a in c.args]) if c is not None else None
                params[exe] = {k.value for d in kw["parameters"].elts
                               if isinstance(d, ast.Dict) for k in d.keys}
        assert conds == {"sim_robot_node": ("LaunchConfigurationEquals", ["robot", "sim"]),
                         "serial_bridge_node": ("LaunchConfigurationEquals",
                                                ["robot", "serial"]),
                         "ros2_control_bridge_node": ("LaunchConfigurationEquals",
                                                      ["robot", "ros2_control"]),
                         "planner_node": None, "edit_policy_node": None}
        assert params["serial_bridge_node"] == {"bundle", "port", "baudrate"}
        assert "device" in params["planner_node"] and "device" in params["edit_policy_node"]


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
