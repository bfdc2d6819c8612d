"""One graph description (``edgerl_ros.graph_description``) behind ``edgerl deploy`` and
``launch/edgerl.launch.py``.

What runs here: the description for each robot kind from a bundle (the task, names, rates
and trigger from its manifest); the named errors of a wrong task/bundle pairing, before any
process starts (the description, ``edgerl deploy`` and the launch file's
``OpaqueFunction``); and the launch file itself, imported with stand-in ``launch`` /
``launch_ros`` / ``ament_index_python`` modules (tiny classes that record their arguments):
its declared arguments are the description's :data:`LAUNCH_ARGUMENTS` and its actions the
description's nodes. What cannot run here: ``ros2 launch`` (the ``launch`` packages are not
installable on this machine), so launch's own argument handling, ``launch_ros``'s parameter
conversion and the node processes it would start are not exercised. ``edgerl deploy`` through
the description end to end is ``tests/ros2_ws/test_deploy.py`` (its result's ``graph``).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import pytest

from edgerl.apps.cli import main
from edgerl.contract.spec import PolicySpec, load_bundle_manifest, sha256_file
from tests.helpers.task_bundles import write_task_bundle

pytestmark = pytest.mark.ros  # the parameter file is checked against the nodes' PARAMS

PKG = Path(__file__).resolve().parents[2] / "ros2_ws" / "src" / "edgerl_ros"
LAUNCH_FILE = PKG / "launch" / "edgerl.launch.py"
SHIPPED_PARAMS = PKG / "config" / "edgerl.yaml"
GOAL_MAP = ("cart_x=slider:position, cart_vel=slider:velocity, pole_angle=hinge:position, "
            "pole_vel=hinge:velocity, goal_x=goal:position")


@pytest.fixture(scope="module")
def goal_bundle(tmp_path_factory) -> Path:
    """A ``cartpole_goal`` bundle: not the old launch default (cartpole), one more
    observation (``goal_x``)."""
    return write_task_bundle(tmp_path_factory.mktemp("goal") / "bundle", task="cartpole_goal")


def _params_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "params.yaml"
    path.write_text(body)
    return path


def _ros2_control_params(tmp_path: Path, observation_map: str = GOAL_MAP,
                         joints: str = "slider") -> Path:
    return _params_file(tmp_path, "ros2_control_bridge_node:\n  ros__parameters:\n"
                                  f"    observation_map: \"{observation_map}\"\n"
                                  f"    command_joints: \"{joints}\"\n")


def _edit_manifest(bundle: Path, **changes) -> None:
    """Rewrite ``bundle``'s manifest with ``changes`` (file hashes kept valid)."""
    spec = PolicySpec.load(bundle)
    for key, value in changes.items():
        if key == "observation_names":
            spec.observation.names = value
        else:
            setattr(spec, key, value)
    spec.files = {f.name: sha256_file(f) for f in bundle.iterdir() if f.name != "manifest.json"}
    spec.save(bundle)


# --- (a) the description from the bundle ----------------------------------------------------
def test_sim_graph_runs_the_manifests_task_names_and_rates(goal_bundle):
    from edgerl_ros.executables import NODE_MODULES
    from edgerl_ros.graph_description import describe_graph

    spec = load_bundle_manifest(goal_bundle)
    graph = describe_graph(goal_bundle)  # the bundle alone: robot sim, shipped parameters
    assert graph.node_names() == ["sim_robot_node", "planner_node", "edit_policy_node"]
    assert graph.task == "cartpole_goal" and graph.node("sim_robot_node").parameters["task"] \
        == "cartpole_goal"
    assert graph.observation_names == ("cart_x", "cart_vel", "pole_angle", "pole_vel",
                                       "goal_x")
    assert graph.action_names == tuple(spec.action.names)
    assert graph.control_hz == graph.rate_hz == 50.0 and graph.planner_period_s == 0.05
    assert graph.trigger == spec.timing.trigger  # 'manifest' resolved to the bundle's
    assert [n.lifecycle for n in graph.nodes] == [False, False, True]
    assert all(n.module == NODE_MODULES[n.name] and n.executable == n.name
               for n in graph.nodes)
    for name in ("planner_node", "edit_policy_node"):
        assert graph.node(name).parameters["bundle"] == str(goal_bundle.resolve())
    assert graph.node("edit_policy_node").parameters["autostart"] is True
    # the shipped file's values arrive (validated), the expert chunk twice per planner period
    assert graph.node("sim_robot_node").parameters["command_timeout_s"] == 0.5
    assert graph.node("sim_robot_node").parameters["expert_every"] == 1
    assert all(n.env == {} for n in graph.nodes)  # rt_priority 0: normal scheduling
    assert graph.params_file == SHIPPED_PARAMS


def test_serial_graph_and_the_real_time_options(goal_bundle):
    from edgerl_ros.common import RT_PRIORITY_ENV
    from edgerl_ros.graph_description import GraphOptions, describe_graph

    cpu = min(os.sched_getaffinity(0))
    graph = describe_graph(goal_bundle, GraphOptions(
        robot="serial", port="/dev/pts/7", baud=115200, rt_priority=30, trigger="state",
        loop_cpus=f"{cpu},{cpu}", device="cpu"))
    assert graph.node_names() == ["serial_bridge_node", "planner_node", "edit_policy_node"]
    bridge = graph.node("serial_bridge_node").parameters
    assert bridge == {"port": "/dev/pts/7", "baudrate": 115200,
                      "bundle": str(goal_bundle.resolve()), "command_field": "effort"}
    edit = graph.node("edit_policy_node").parameters
    assert edit["trigger"] == "state" and graph.trigger == "state"
    assert edit["loop_cpus"] == str(cpu)
    assert edit["device"] == graph.node("planner_node").parameters["device"] == "cpu"
    # SCHED_FIFO on the state -> command path only; the planner stays at normal priority
    assert graph.node("serial_bridge_node").env == {RT_PRIORITY_ENV: "30"}
    assert graph.node("edit_policy_node").env == {RT_PRIORITY_ENV: "30"}
    assert graph.node("planner_node").env == {}


def test_ros2_control_and_ros_graphs(goal_bundle, tmp_path):
    from edgerl_ros.graph_description import GraphOptions, describe_graph

    graph = describe_graph(goal_bundle, GraphOptions(
        robot="ros2_control", params_file=_ros2_control_params(tmp_path)))
    assert graph.node_names() == ["ros2_control_bridge_node", "planner_node",
                                  "edit_policy_node"]
    bridge = graph.node("ros2_control_bridge_node").parameters
    assert bridge["observation_map"] == GOAL_MAP and bridge["command_joints"] == "slider"
    assert bridge["bundle"] == str(goal_bundle.resolve())
    ros = describe_graph(goal_bundle, GraphOptions(robot="ros"))
    assert ros.node_names() == ["planner_node", "edit_policy_node"]
    assert ros.task == "cartpole_goal"


def test_robot_nodes_is_the_descriptions_node_list(goal_bundle):
    """``graph_description.robot_nodes`` (what the soak and older callers use) returns exactly
    the description's parameters."""
    from edgerl_ros.graph_config import DEFAULT_CONFIG, load_params_yaml
    from edgerl_ros.graph_description import GraphOptions, describe_graph, robot_nodes

    spec = load_bundle_manifest(goal_bundle)
    params = load_params_yaml(DEFAULT_CONFIG)
    for robot in ("sim", "serial", "ros"):
        nodes = robot_nodes(robot, params, spec, goal_bundle.resolve(), "/dev/pts/7")
        graph = describe_graph(goal_bundle, GraphOptions(robot=robot, port="/dev/pts/7"))
        assert nodes == graph.node_params(), robot


# --- (c) wrong pairings: a named error before anything starts -------------------------------
def test_a_task_override_that_is_not_the_manifests_fails(goal_bundle):
    from edgerl_ros.graph_description import GraphDescriptionError, GraphOptions, describe_graph

    with pytest.raises(GraphDescriptionError,
                       match=r"task 'cartpole' does not match bundle .*manifest task "
                             r"'cartpole_goal'"):
        describe_graph(goal_bundle, GraphOptions(task="cartpole"))
    assert describe_graph(goal_bundle, GraphOptions(task="cartpole_goal")).task \
        == "cartpole_goal"


def test_a_parameter_files_sim_task_that_is_not_the_manifests_fails(goal_bundle, tmp_path):
    from edgerl_ros.graph_description import GraphDescriptionError, GraphOptions, describe_graph

    path = _params_file(tmp_path, "sim_robot_node:\n  ros__parameters:\n    task: cartpole\n")
    with pytest.raises(GraphDescriptionError) as err:
        describe_graph(goal_bundle, GraphOptions(params_file=path))
    msg = str(err.value)
    assert str(path) in msg and "sim_robot_node task 'cartpole'" in msg
    assert str(goal_bundle.resolve()) in msg and "'cartpole_goal'" in msg


def test_a_sim_task_of_other_sizes_than_the_bundle_fails(tmp_path):
    """A cartpole bundle (4 observations) whose manifest names cartpole_goal (5)."""
    from edgerl_ros.graph_description import GraphDescriptionError, describe_graph

    bundle = write_task_bundle(tmp_path / "b")
    _edit_manifest(bundle, task="cartpole_goal")
    with pytest.raises(GraphDescriptionError,
                       match=r"sim task 'cartpole_goal' has 5 observations and 1 actions, "
                             r"bundle .* has 4 and 1"):
        describe_graph(bundle)


@pytest.mark.slow
def test_a_sim_task_whose_names_differ_from_the_bundle_fails(tmp_path):
    """Same sizes, other names: read from the task in a child Python (no torch here)."""
    from edgerl_ros.graph_description import GraphDescriptionError, GraphOptions, describe_graph

    bundle = write_task_bundle(tmp_path / "b")
    _edit_manifest(bundle, observation_names=["x", "v", "theta", "omega"])
    with pytest.raises(GraphDescriptionError) as err:
        describe_graph(bundle)
    msg = str(err.value)
    assert "sim task 'cartpole' observations [cart_x, cart_vel, pole_angle, pole_vel]" in msg
    assert "observations [x, v, theta, omega]" in msg and str(bundle.resolve()) in msg
    # the check is the names': without it the sizes agree and the graph is described
    assert describe_graph(bundle, GraphOptions(check_sim_names=False)).task == "cartpole"


@pytest.mark.parametrize(("observation_map", "joints", "needle"), [
    (GOAL_MAP.rsplit(",", 1)[0], "slider", "no joint for goal_x"),
    (GOAL_MAP + ", tip=tip:position", "slider", "'tip' is not an observation"),
    ("", "slider", "observation_map is empty"),
    (GOAL_MAP, "slider, hinge", r"command_joints \[slider, hinge\] are 2 joints"),
])
def test_a_ros2_control_map_that_does_not_fit_the_bundle_fails(goal_bundle, tmp_path,
                                                               observation_map, joints,
                                                               needle):
    from edgerl_ros.graph_description import GraphDescriptionError, GraphOptions, describe_graph

    path = _ros2_control_params(tmp_path, observation_map, joints)
    with pytest.raises(GraphDescriptionError, match=needle) as err:
        describe_graph(goal_bundle, GraphOptions(robot="ros2_control", params_file=path))
    msg = str(err.value)
    assert str(path) in msg and str(goal_bundle.resolve()) in msg and "cartpole_goal" in msg


@pytest.mark.parametrize(("options", "needle"), [
    ({"robot": "serial"}, "robot 'serial' needs a port"),
    ({"robot": "drone"}, "robot 'drone': choose one of sim, serial, ros2_control, ros"),
    ({"trigger": "sometimes"}, "trigger 'sometimes'"),
    ({"device": "tpu"}, "device 'tpu'"),
    ({"rt_priority": 120}, "rt_priority must be 0..99"),
    ({"loop_cpus": "x"}, "CPU list 'x'"),
])
def test_bad_options_are_named(goal_bundle, options, needle):
    from edgerl_ros.graph_description import GraphDescriptionError, GraphOptions, describe_graph

    with pytest.raises(GraphDescriptionError, match=needle):
        describe_graph(goal_bundle, GraphOptions(**options))


def test_deploy_fails_on_a_wrong_pairing_before_starting_anything(goal_bundle, tmp_path,
                                                                  capsys):
    path = _params_file(tmp_path, "sim_robot_node:\n  ros__parameters:\n    task: cartpole\n")
    rc = main(["deploy", "--bundle", str(goal_bundle), "--params", str(path),
               "--duration", "1", "--log-dir", str(tmp_path / "logs")])
    err = capsys.readouterr().err
    assert rc == 1
    assert "sim_robot_node task 'cartpole' does not match" in err and "cartpole_goal" in err
    assert not (tmp_path / "logs").exists()  # nothing started: no node log directory


# --- (b) the launch file is driven by the description ---------------------------------------
class _Recorded:
    """A stand-in launch class: keeps its arguments; every instance is in ``made``."""

    made: list = []

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs
        _Recorded.made.append(self)


def _stand_in_launch(monkeypatch) -> dict[str, type]:
    """Put tiny ``launch``, ``launch_ros`` and ``ament_index_python`` modules in
    ``sys.modules``; returns their classes by name."""
    classes = {name: type(name, (_Recorded,), {}) for name in (
        "LaunchDescription", "DeclareLaunchArgument", "OpaqueFunction", "Node",
        "LifecycleNode")}
    _Recorded.made = []

    def module(name: str, **attrs) -> types.ModuleType:
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, mod)
        return mod

    def share_dir(package: str) -> str:
        assert package == "edgerl_ros"
        return str(PKG)  # the source tree holds config/ as the install's share/ does

    module("launch", LaunchDescription=classes["LaunchDescription"])
    module("launch.actions", DeclareLaunchArgument=classes["DeclareLaunchArgument"],
           OpaqueFunction=classes["OpaqueFunction"])
    module("launch.logging", get_logger=logging.getLogger)
    module("launch_ros")
    module("launch_ros.actions", Node=classes["Node"], LifecycleNode=classes["LifecycleNode"])
    module("ament_index_python")
    module("ament_index_python.packages", get_package_share_directory=share_dir)
    return classes


def _load_launch_file() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("edgerl_launch_under_test", LAUNCH_FILE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _launch(monkeypatch, **arguments: str):
    """Run the launch file's ``generate_launch_description`` and its ``OpaqueFunction``
    with ``arguments`` over the declared defaults; returns (declared, actions, classes)."""
    classes = _stand_in_launch(monkeypatch)
    ld = _load_launch_file().generate_launch_description()
    assert isinstance(ld, classes["LaunchDescription"])
    entities = list(ld.args[0])
    declared = [e for e in entities if isinstance(e, classes["DeclareLaunchArgument"])]
    opaque = [e for e in entities if isinstance(e, classes["OpaqueFunction"])]
    assert len(opaque) == 1 and entities[-1] is opaque[0]  # arguments first, then the graph
    values = {d.args[0]: d.kwargs["default_value"] for d in declared
              if d.kwargs["default_value"] is not None}
    context = SimpleNamespace(launch_configurations={**values, **arguments})
    actions = opaque[0].kwargs["function"](context)
    return declared, actions, classes


def test_launch_file_imports_without_the_launch_packages():
    """The launch file imports ``launch`` only when ROS 2 runs it, so this test process
    (which has no ``launch``) can load it."""
    if importlib.util.find_spec("launch") is not None:
        pytest.skip("the launch package is installed here")
    mod = _load_launch_file()
    assert callable(mod.generate_launch_description)
    with pytest.raises(ModuleNotFoundError, match="launch"):
        mod.generate_launch_description()


def test_launch_arguments_are_the_descriptions(monkeypatch, goal_bundle):
    from edgerl_ros.graph_description import LAUNCH_ARGUMENTS

    declared, _actions, _ = _launch(monkeypatch, bundle=str(goal_bundle))
    got = [(d.args[0], d.kwargs["default_value"],
            tuple(d.kwargs["choices"]) if d.kwargs["choices"] else None) for d in declared]
    assert got == [(a.name, a.default, a.choices) for a in LAUNCH_ARGUMENTS]
    names = [a.name for a in LAUNCH_ARGUMENTS]
    assert {"bundle", "robot", "params_file", "port", "baud", "device", "rt_priority",
            "trigger", "loop_cpus"} <= set(names)
    assert dict(zip(names, (a.default for a in LAUNCH_ARGUMENTS)))["bundle"] is None  # required
    # every choice list holds its default (launch refuses a default outside its choices)
    assert all(a.default in a.choices for a in LAUNCH_ARGUMENTS if a.choices)


def _compare(actions, graph, classes) -> None:
    """``actions`` start exactly ``graph``'s nodes, in order."""
    assert len(actions) == len(graph.nodes)
    for action, node in zip(actions, graph.nodes):
        kind = classes["LifecycleNode"] if node.lifecycle else classes["Node"]
        assert type(action) is kind, node.name
        kw = action.kwargs
        assert (kw["package"], kw["executable"], kw["name"]) == ("edgerl_ros", node.executable,
                                                                 node.name)
        assert kw["parameters"] == [node.parameters]
        assert kw.get("additional_env", {}) == node.env
        if node.lifecycle:
            assert kw["namespace"] == ""


def test_launch_starts_the_descriptions_sim_graph(monkeypatch, goal_bundle):
    from edgerl_ros.graph_description import describe_graph

    _declared, actions, classes = _launch(monkeypatch, bundle=str(goal_bundle))
    graph = describe_graph(goal_bundle)
    _compare(actions, graph, classes)
    assert actions[0].kwargs["parameters"][0]["task"] == "cartpole_goal"


def test_launch_serial_with_real_time_options(monkeypatch, goal_bundle):
    from edgerl_ros.graph_description import GraphOptions, describe_graph

    cpu = str(min(os.sched_getaffinity(0)))
    _declared, actions, classes = _launch(
        monkeypatch, bundle=str(goal_bundle), robot="serial", port="/dev/pts/7",
        baud="115200", rt_priority="30", trigger="clock", loop_cpus=cpu, device="cpu",
        autostart="false")
    graph = describe_graph(goal_bundle, GraphOptions(
        robot="serial", port="/dev/pts/7", baud=115200, rt_priority=30, trigger="clock",
        loop_cpus=cpu, device="cpu", autostart=False))
    _compare(actions, graph, classes)
    edit = actions[-1].kwargs["parameters"][0]
    assert edit["autostart"] is False and edit["trigger"] == "clock"
    assert actions[0].kwargs["additional_env"] == {"EDGERL_RT_PRIORITY": "30"}
    assert "additional_env" not in actions[1].kwargs  # the planner


def test_launch_ros2_control_from_a_params_file(monkeypatch, goal_bundle, tmp_path):
    from edgerl_ros.graph_description import GraphOptions, describe_graph

    path = _ros2_control_params(tmp_path)
    _declared, actions, classes = _launch(monkeypatch, bundle=str(goal_bundle),
                                          robot="ros2_control", params_file=str(path))
    _compare(actions, describe_graph(goal_bundle, GraphOptions(robot="ros2_control",
                                                               params_file=path)), classes)
    assert actions[0].kwargs["parameters"][0]["observation_map"] == GOAL_MAP


@pytest.mark.parametrize(("arguments", "needle"), [
    ({"task": "cartpole"}, r"task 'cartpole' does not match bundle .*'cartpole_goal'"),
    ({"robot": "ros2_control"}, r"observation_map is empty; map each of bundle .*goal_x"),
    ({"baud": "fast"}, r"launch argument baud:='fast': expected an integer"),
    ({"bundle": ""}, r"bundle:= is required"),
])
def test_launch_fails_on_a_wrong_pairing_before_any_node(monkeypatch, goal_bundle, arguments,
                                                         needle):
    from edgerl_ros.graph_description import GraphDescriptionError

    with pytest.raises(GraphDescriptionError, match=needle):
        _launch(monkeypatch, **{"bundle": str(goal_bundle), **arguments})
    assert not [m for m in _Recorded.made if type(m).__name__ in ("Node", "LifecycleNode")]
