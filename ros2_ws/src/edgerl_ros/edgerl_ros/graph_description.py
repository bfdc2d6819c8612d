"""One description of edgerl's node graph, behind both ``edgerl deploy`` and
``launch/edgerl.launch.py``.

Given a bundle, the robot kind and options, :func:`describe_graph` returns the nodes to
start (executable and ``python -m`` module, node name, lifecycle or not, parameters, extra
environment), in start order. Everything the bundle decides comes from its MANIFEST: the
sim task, the observation/action names the robot side must speak, the control rate, the
planner period and the trigger (never a default task name). ``edgerl deploy``
(:func:`edgerl_ros.graph.deploy`, via :func:`edgerl_ros.graph_description.robot_nodes`) starts
``python -m`` processes from it; the launch file turns the same description into
``Node``/``LifecycleNode`` actions at launch time with :func:`launch_actions`, reading its
arguments (:data:`LAUNCH_ARGUMENTS`) through :func:`describe_launch`.

Why: the two used to build the graph separately; the launch file ran ``task:=cartpole``
whatever the bundle, so a ``cartpole_goal`` bundle started a graph whose planner dropped
every state (``wrong_length``) and whose robot refused every command, silently. A wrong
pairing now fails before any process starts with :class:`GraphDescriptionError`, whose
message names both sides:

* a ``task`` cross-check (launch argument ``task:=``, :attr:`GraphOptions.task`) that is not
  the manifest's task;
* ``robot=sim``: a parameter file that sets ``sim_robot_node.task`` to another task, or a
  registered sim task whose observations/actions (sizes, then names) differ from the
  manifest's (the names are read from the task in a child Python, so neither
  ``edgerl deploy`` nor ``ros2 launch`` imports torch; a task the registry does not know is
  left to ``sim_robot_node``, which exits naming it);
* ``robot=ros2_control``: a parameter file whose ``observation_map`` does not map exactly the
  bundle's observation names, or whose ``command_joints`` are not one per action;
* ``robot=serial`` without a port.

Pure Python: nothing here imports rclpy or the ``launch`` packages at module level (the
parameter file is validated against the nodes' declared parameters, which imports the node
modules, and so rclpy, when a file is read).
"""

from __future__ import annotations

import functools
import json
import logging
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgerl_ros.executables import NODE_MODULES
from edgerl_ros.graph_config import DEFAULT_CONFIG, ROBOTS, DeployError, load_params_yaml, rt_env

__all__ = ["DEVICES", "LAUNCH_ARGUMENTS", "LIFECYCLE_NODES", "PACKAGE", "TRIGGERS",
           "GraphDescription", "GraphDescriptionError", "GraphOptions", "LaunchArgument",
           "NodeDescription", "describe_graph", "describe_launch", "launch_actions",
           "options_from_launch", "robot_nodes"]

log = logging.getLogger(__name__)

#: The ROS 2 package whose executables the graph runs (setup.py's console scripts).
PACKAGE = "edgerl_ros"
#: Nodes that are managed (lifecycle) nodes: the launch file starts them as ``LifecycleNode``.
LIFECYCLE_NODES = frozenset({"edit_policy_node"})
#: onnxruntime devices of the planner and the edit policy.
DEVICES = ("auto", "cpu", "cuda", "tensorrt")
#: What makes the edit loop tick (``manifest`` = the bundle's ``timing.trigger``).
TRIGGERS = ("manifest", "state", "clock")
#: Longest wait for the child Python that reads a sim task's names (first torch import).
SIM_NAMES_TIMEOUT_S = 180.0


class GraphDescriptionError(DeployError):
    """The graph cannot be described: a bad option, or a bundle that does not fit the
    requested robot side (the message names both sides: the bundle and its manifest's
    task/names, and the option or parameter file that disagrees)."""


@dataclass(frozen=True)
class GraphOptions:
    """What the caller chooses; everything else comes from the bundle's manifest.

    Attributes:
        robot: The robot side (:data:`~edgerl_ros.graph_config.ROBOTS`): ``sim``,
            ``serial``, ``ros2_control`` or ``ros`` (no robot node).
        params_file: ROS 2 parameter YAML (``None``: none; default: the package's
            ``config/edgerl.yaml``). Ignored when :func:`describe_graph` gets ``params``.
        port: Serial device for ``robot="serial"`` (``/dev/ttyACM0``, a pty path).
        baud: UART baud rate for ``robot="serial"``.
        device: onnxruntime device of the planner and the edit policy (``None``: the
            parameter file's).
        rt_priority: SCHED_FIFO priority of the processes on the state -> command path
            (:data:`~edgerl_ros.graph_config.RT_NODES`, through their environment; 0 = off).
        trigger: The edit node's tick trigger (``None``: the parameter file's).
        loop_cpus: CPUs of the edit node's loop thread, e.g. ``"3"`` (``None``: the
            parameter file's).
        task: Optional cross-check: the task the caller expects; one that is not the
            manifest's fails (the graph never runs a task other than the manifest's).
        autostart: The edit node configures and activates itself.
        check_sim_names: ``robot="sim"``: compare the task's observation/action names with
            the manifest's (a child Python builds the task once per task and process).
    """

    robot: str = "sim"
    params_file: Path | None = DEFAULT_CONFIG
    port: str = ""
    baud: int = 1_000_000
    device: str | None = None
    rt_priority: int = 0
    trigger: str | None = None
    loop_cpus: str | None = None
    task: str | None = None
    autostart: bool = True
    check_sim_names: bool = True

    def check(self) -> None:
        """Raise :class:`GraphDescriptionError` for an option out of its range."""
        if self.robot not in ROBOTS:
            raise GraphDescriptionError(f"robot {self.robot!r}: choose one of "
                                        f"{', '.join(ROBOTS)}")
        if self.device is not None and self.device not in DEVICES:
            raise GraphDescriptionError(f"device {self.device!r}: choose one of "
                                        f"{', '.join(DEVICES)}")
        if self.trigger is not None and self.trigger not in TRIGGERS:
            raise GraphDescriptionError(f"trigger {self.trigger!r}: choose one of "
                                        f"{', '.join(TRIGGERS)}")
        if not 0 <= int(self.rt_priority) <= 99:
            raise GraphDescriptionError(f"rt_priority must be 0..99, got {self.rt_priority}")
        if self.robot == "serial" and not self.port:
            raise GraphDescriptionError("robot 'serial' needs a port (--port /dev/ttyACM0)")
        if self.robot == "serial" and not 1200 <= int(self.baud) <= 20_000_000:
            raise GraphDescriptionError(f"baud must be in 1200..20000000, got {self.baud}")


@dataclass(frozen=True)
class NodeDescription:
    """One node of the graph.

    Attributes:
        name: Node name (also its executable's name and the key of its parameters in a
            parameter file).
        executable: Console script (setup.py), what a launch file's ``Node`` runs.
        module: ``python -m`` target, what ``edgerl deploy`` runs.
        lifecycle: A managed node (``LifecycleNode`` in a launch file).
        parameters: Its ROS parameters (the parameter file's, then the graph's own).
        env: Extra environment of its process (its SCHED_FIFO priority).
    """

    name: str
    executable: str
    module: str
    lifecycle: bool
    parameters: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class GraphDescription:
    """The graph for one bundle: what the manifest decided and the nodes, in start order.

    Attributes:
        bundle: The bundle directory (absolute).
        robot: The robot side.
        task: The manifest's task.
        observation_names: The manifest's observation names (what the robot side publishes).
        action_names: The manifest's action names (what the robot side takes).
        control_hz: The manifest's control rate.
        rate_hz: The edit loop's rate (the parameter file's ``rate_hz``, else
            ``control_hz``).
        planner_period_s: The planner's period (the manifest's ``chunk.period_s`` unless
            the parameter file sets one).
        trigger: The edit loop's trigger in effect (``manifest`` resolved to the
            manifest's ``timing.trigger``).
        params_file: The parameter file read (``None``: none).
        nodes: The nodes, in start order.
    """

    bundle: Path
    robot: str
    task: str
    observation_names: tuple[str, ...]
    action_names: tuple[str, ...]
    control_hz: float
    rate_hz: float
    planner_period_s: float
    trigger: str
    params_file: Path | None
    nodes: tuple[NodeDescription, ...]

    def node(self, name: str) -> NodeDescription:
        """The node called ``name`` (``KeyError`` if the graph has none)."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node {name!r} in the graph ({', '.join(self.node_names())})")

    def node_names(self) -> list[str]:
        """Node names in start order."""
        return [n.name for n in self.nodes]

    def node_params(self) -> dict[str, dict[str, Any]]:
        """``{node: parameters}`` in start order (a copy: the caller may add to it)."""
        return {n.name: dict(n.parameters) for n in self.nodes}

    def summary(self) -> dict[str, Any]:
        """A JSON-ready summary (what a launch logs and ``edgerl deploy`` reports)."""
        return {"task": self.task, "robot": self.robot, "control_hz": self.control_hz,
                "rate_hz": self.rate_hz, "planner_period_s": self.planner_period_s,
                "trigger": self.trigger, "nodes": self.node_names(),
                "observation_names": list(self.observation_names),
                "action_names": list(self.action_names)}

    def describe(self) -> str:
        """One line for a log."""
        return (f"edgerl graph: task {self.task} ({len(self.observation_names)} observations, "
                f"{len(self.action_names)} actions) at {self.rate_hz:g} Hz, trigger "
                f"{self.trigger}, robot {self.robot}: {', '.join(self.node_names())}")


# --- the description ------------------------------------------------------------------------
def describe_graph(bundle: str | Path, options: GraphOptions | None = None, *,
                   spec: Any = None, params: dict[str, dict[str, Any]] | None = None
                   ) -> GraphDescription:
    """The node graph for ``bundle`` and ``options`` (see the module docstring).

    Args:
        bundle: Bundle directory (manifest.json + ONNX).
        options: The caller's choices (default: :class:`GraphOptions`, a sim robot).
        spec: The bundle's manifest when the caller loaded it already (else loaded here).
        params: ``{node: {name: value}}`` when the caller read the parameter file already
            (else ``options.params_file`` is read and validated here).

    Raises:
        GraphDescriptionError: a bad option, an unreadable bundle, a wrong task/bundle or
            parameter-file/bundle pairing (named), all before anything starts.
        DeployError: an invalid parameter file (from ``load_params_yaml``).
    """
    opts = options or GraphOptions()
    opts.check()
    bundle = Path(bundle).resolve()
    if spec is None:
        from edgerl.contract.spec import BundleError, load_bundle_manifest

        try:
            spec = load_bundle_manifest(bundle)
        except (BundleError, ValueError) as exc:
            raise GraphDescriptionError(f"bundle: {exc}") from exc
    params_file = Path(opts.params_file) if params is None and opts.params_file is not None \
        else None
    source = f"parameter file {params_file}" if params_file is not None else "the parameters"
    if params is None:
        params = load_params_yaml(params_file)
    where = _BundleSide(bundle, spec)
    if opts.task and opts.task != spec.task:
        raise GraphDescriptionError(
            f"task {opts.task!r} does not match {where}: the graph runs the manifest's "
            f"task; leave task unset or use a bundle trained on {opts.task!r}")

    edit = {**params.get("edit_policy_node", {}), "bundle": str(bundle),
            "autostart": bool(opts.autostart)}
    if opts.trigger is not None:
        edit["trigger"] = opts.trigger
    if opts.loop_cpus is not None:
        edit["loop_cpus"] = _loop_cpus(opts.loop_cpus)
    planner = {**params.get("planner_node", {}), "bundle": str(bundle)}
    if opts.device is not None:
        edit["device"] = planner["device"] = opts.device
    command_field = edit.get("command_field", "effort")

    nodes: dict[str, dict[str, Any]] = {}
    if opts.robot == "sim":
        nodes["sim_robot_node"] = _sim_params(params.get("sim_robot_node", {}), spec, where,
                                              source, opts.check_sim_names)
    elif opts.robot == "serial":
        nodes["serial_bridge_node"] = {
            **params.get("serial_bridge_node", {}), "port": str(opts.port),
            "baudrate": int(opts.baud), "bundle": str(bundle), "command_field": command_field}
    elif opts.robot == "ros2_control":
        bridge = {**params.get("ros2_control_bridge_node", {}), "bundle": str(bundle),
                  "command_field": command_field}
        _check_ros2_control(bridge, spec, where, source)
        nodes["ros2_control_bridge_node"] = bridge
    nodes["planner_node"] = planner
    nodes["edit_policy_node"] = edit

    trigger = edit.get("trigger", "manifest")
    return GraphDescription(
        bundle=bundle, robot=opts.robot, task=spec.task,
        observation_names=tuple(spec.observation.names), action_names=tuple(spec.action.names),
        control_hz=float(spec.control_hz),
        rate_hz=float(edit.get("rate_hz") or 0.0) or float(spec.control_hz),
        planner_period_s=float(planner.get("period_s") or 0.0) or float(spec.chunk.period_s),
        trigger=spec.timing.trigger if trigger == "manifest" else trigger,
        params_file=params_file,
        nodes=tuple(NodeDescription(name=name, executable=name, module=NODE_MODULES[name],
                                    lifecycle=name in LIFECYCLE_NODES, parameters=values,
                                    env=rt_env(name, opts.rt_priority))
                    for name, values in nodes.items()))


@dataclass(frozen=True)
class _BundleSide:
    """The bundle's side of a pairing error: its path, task and names."""

    bundle: Path
    spec: Any

    def __str__(self) -> str:
        return f"bundle {self.bundle} (manifest task {self.spec.task!r})"

    def observations(self) -> str:
        return f"{self} observations [{', '.join(self.spec.observation.names)}]"

    def actions(self) -> str:
        return f"{self} actions [{', '.join(self.spec.action.names)}]"


def _loop_cpus(text: str) -> str:
    """``loop_cpus`` checked against this machine's CPUs, as ``"2,3"`` (``""``: unpinned)."""
    from edgerl.runtime.cpu_affinity import cpu_list

    try:
        return ",".join(map(str, cpu_list(text, "loop_cpus")))
    except ValueError as exc:
        raise GraphDescriptionError(str(exc)) from exc


def _sim_params(base: dict[str, Any], spec: Any, where: _BundleSide, source: str,
                check_names: bool) -> dict[str, Any]:
    """``sim_robot_node``'s parameters: the manifest's task, checked against the sim task
    registry, and the expert chunk about twice per planner period."""
    asked = base.get("task")
    if asked is not None and asked != spec.task:
        raise GraphDescriptionError(
            f"{source}: sim_robot_node task {asked!r} does not match {where}: the sim robot "
            f"runs the manifest's task; remove 'task' from the parameter file")
    _check_sim_task(spec, where, check_names)
    sim = {**base, "task": spec.task}
    if not sim.get("expert_every"):  # absent or 0 (auto): the planner takes one every
        # period; computing it at every step (7-14 ms at 200 Hz in the composed robot,
        # under its GIL contention) held the composed robot at 33-56 Hz of 200
        rate = float(sim.get("rate_hz") or 0.0) or float(spec.control_hz)
        sim["expert_every"] = max(1, int(spec.chunk.period_s * rate / 2))
    return sim


def _check_sim_task(spec: Any, where: _BundleSide, check_names: bool) -> None:
    """The registered sim task ``spec.task`` publishes the manifest's observations and takes
    its actions (names and so sizes, read in a child Python when ``check_names``: this
    layer does not import the simulators)."""
    if not check_names:
        return
    names = _sim_task_names(spec.task)
    if names is None:  # not buildable here: sim_robot_node exits naming it
        return
    obs, act = names
    if (len(obs), len(act)) != (spec.observation.dim, spec.action.dim):
        raise GraphDescriptionError(
            f"sim task {spec.task!r} has {len(obs)} observations and {len(act)} actions, "
            f"{where} has {spec.observation.dim} and {spec.action.dim}: the planner would "
            f"drop every state and the robot every command")
    if obs != tuple(spec.observation.names):
        raise GraphDescriptionError(
            f"sim task {spec.task!r} observations [{', '.join(obs)}] differ from "
            f"{where.observations()}")
    if act != tuple(spec.action.names):
        raise GraphDescriptionError(
            f"sim task {spec.task!r} actions [{', '.join(act)}] differ from {where.actions()}")


_SIM_NAMES = """
import json, sys
from edgerl.sim.registry import make_task
env = make_task(sys.argv[1], num_envs=1, device="cpu")
try:
    print(json.dumps([list(env.spec.obs_names), list(env.spec.action_names)]))
finally:
    env.close()
"""


@functools.lru_cache(maxsize=32)
def _sim_task_names(task: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The sim task's (observation names, action names), read in a child Python so this
    process does not import torch; ``None`` (logged) when the task cannot be built here (the
    sim robot node then reports why)."""
    try:
        proc = subprocess.run([sys.executable, "-c", _SIM_NAMES, task], capture_output=True,
                              text=True, timeout=SIM_NAMES_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("could not read sim task %r's names (%s); not compared", task, exc)
        return None
    if proc.returncode != 0:
        log.warning("could not build sim task %r to read its names (%s); not compared", task,
                    proc.stderr.strip().splitlines()[-1:] or proc.returncode)
        return None
    obs, act = json.loads(proc.stdout.strip().splitlines()[-1])
    return tuple(obs), tuple(act)


def _check_ros2_control(bridge: dict[str, Any], spec: Any, where: _BundleSide,
                        source: str) -> None:
    """The parameter file maps exactly the bundle's observations onto /joint_states and
    names one controller joint per action (what ``ros2_control_bridge_node`` refuses at
    start, here before anything starts)."""
    from edgerl_ros.ros2_control_bridge_node import parse_observation_map

    text = str(bridge.get("observation_map", ""))
    if not text.strip():
        raise GraphDescriptionError(
            f"{source}: ros2_control_bridge_node observation_map is empty; map each of "
            f"{where.observations()} to joint:field")
    try:
        parse_observation_map(text, list(spec.observation.names))
    except ValueError as exc:
        raise GraphDescriptionError(
            f"{source}: ros2_control_bridge_node {exc}; it must map exactly "
            f"{where.observations()}") from exc
    joints = [j.strip() for j in str(bridge.get("command_joints", "")).split(",") if j.strip()]
    if len(joints) != spec.action.dim:
        raise GraphDescriptionError(
            f"{source}: ros2_control_bridge_node command_joints [{', '.join(joints)}] are "
            f"{len(joints)} joints for {where.actions()}")


# --- the launch file's side -----------------------------------------------------------------
@dataclass(frozen=True)
class LaunchArgument:
    """One argument of ``launch/edgerl.launch.py`` (it declares exactly
    :data:`LAUNCH_ARGUMENTS`).

    Attributes:
        name: ``name:=value`` on the ``ros2 launch`` command line.
        default: Default value (``None``: required).
        description: What ``ros2 launch --show-args`` shows.
        choices: Allowed values (``None``: any).
    """

    name: str
    default: str | None
    description: str
    choices: tuple[str, ...] | None = None


#: The launch file's arguments, in the order it declares them.
LAUNCH_ARGUMENTS: tuple[LaunchArgument, ...] = (
    LaunchArgument("bundle", None, "bundle directory (manifest.json + ONNX); the task, the "
                   "observation/action names, the rates and the trigger come from its manifest"),
    LaunchArgument("robot", "sim", "robot side: sim_robot_node (the manifest's task), "
                   "serial_bridge_node (edgerl firmware on port), ros2_control_bridge_node "
                   "(mapped in params_file) or ros (the robot's own driver; no robot node)",
                   tuple(ROBOTS)),
    LaunchArgument("params_file", "", "ROS 2 parameter YAML ('' = the package's "
                   "config/edgerl.yaml); robot:=ros2_control needs its observation_map and "
                   "command_joints"),
    LaunchArgument("port", "/dev/ttyACM0", "serial device (robot:=serial)"),
    LaunchArgument("baud", "1000000", "UART baud rate (robot:=serial)"),
    LaunchArgument("device", "", "onnxruntime device of the planner and edit policy ('' = "
                   "the parameter file's)", ("", *DEVICES)),
    LaunchArgument("rt_priority", "0", "SCHED_FIFO priority (1-99) of the state -> command "
                   "processes (robot node, edit policy); 0 = normal scheduling"),
    LaunchArgument("trigger", "", "edit loop trigger ('' = the parameter file's): manifest "
                   "(as trained), state (each state message) or clock", ("", *TRIGGERS)),
    LaunchArgument("loop_cpus", "", "CPUs of the edit node's loop thread, e.g. 3 or 2-3 "
                   "('' = the parameter file's)"),
    LaunchArgument("autostart", "true", "the edit policy configures and activates itself "
                   "(false: drive it with ros2 lifecycle set)", ("true", "false")),
    LaunchArgument("task", "", "optional cross-check: fail unless the bundle's manifest "
                   "names this task ('' = no check; the graph always runs the manifest's)"),
)


def _int_argument(values: Mapping[str, str], name: str) -> int:
    text = str(values.get(name, "")).strip()
    try:
        return int(text)
    except ValueError:
        raise GraphDescriptionError(f"launch argument {name}:={text!r}: expected an "
                                    f"integer") from None


def options_from_launch(values: Mapping[str, str], default_params_file: str | Path
                        ) -> tuple[Path, GraphOptions]:
    """The bundle and :class:`GraphOptions` for the launch arguments ``values`` (the launch
    context's ``launch_configurations``: every value a string; ``''`` = not set).

    Raises:
        GraphDescriptionError: a missing bundle or an argument that does not parse.
    """
    def text(name: str) -> str:
        return str(values.get(name, "") or "").strip()

    if not text("bundle"):
        raise GraphDescriptionError("launch argument bundle:= is required (the bundle "
                                    "directory)")
    autostart = text("autostart").lower() or "true"
    if autostart not in ("true", "false"):
        raise GraphDescriptionError(f"launch argument autostart:={autostart!r}: expected true "
                                    f"or false")
    opts = GraphOptions(
        robot=text("robot") or "sim",
        params_file=Path(text("params_file") or default_params_file),
        port=text("port"), baud=_int_argument(values, "baud") if text("baud") else 1_000_000,
        device=text("device") or None,
        rt_priority=_int_argument(values, "rt_priority") if text("rt_priority") else 0,
        trigger=text("trigger") or None, loop_cpus=text("loop_cpus") or None,
        task=text("task") or None, autostart=autostart == "true")
    return Path(text("bundle")), opts


def describe_launch(values: Mapping[str, str], default_params_file: str | Path
                    ) -> GraphDescription:
    """:func:`describe_graph` for the launch arguments ``values`` (see
    :func:`options_from_launch`); what the launch file's ``OpaqueFunction`` calls."""
    bundle, opts = options_from_launch(values, default_params_file)
    return describe_graph(bundle, opts)


def launch_actions(graph: GraphDescription, node_cls: Callable[..., Any],
                   lifecycle_node_cls: Callable[..., Any], output: str = "screen") -> list[Any]:
    """The launch actions that start ``graph``: ``node_cls(...)`` for each node,
    ``lifecycle_node_cls(...)`` for a lifecycle one (``launch_ros.actions.Node`` and
    ``LifecycleNode`` in the launch file; stand-ins in the tests), in start order.

    Each gets the package, executable, node name, its parameters as one dict (values typed
    as the parameter file and the graph set them), ``output`` and, when its process runs at
    a SCHED_FIFO priority, ``additional_env``.
    """
    actions = []
    for n in graph.nodes:
        kwargs: dict[str, Any] = {"package": PACKAGE, "executable": n.executable,
                                  "name": n.name, "parameters": [dict(n.parameters)],
                                  "output": output}
        if n.env:
            kwargs["additional_env"] = dict(n.env)
        if n.lifecycle:
            actions.append(lifecycle_node_cls(namespace="", **kwargs))
        else:
            actions.append(node_cls(**kwargs))
    return actions


def robot_nodes(robot: str, params: dict[str, dict[str, Any]], spec: Any, bundle: Path,
                port: str = "", baud: int = 1_000_000) -> dict[str, dict[str, Any]]:
    """``{node: parameters}`` of the graph for ``robot`` (see :data:`ROBOTS`), in start order:
    the nodes of :func:`edgerl_ros.graph_description.describe_graph` (the one description
    behind ``edgerl deploy`` and the launch file), for callers that read the parameter file
    and the manifest themselves.

    Raises:
        DeployError: unknown robot, ``serial`` without a port, or (as its subclass
            ``GraphDescriptionError``) a bundle that does not fit the robot side.
    """
    opts = GraphOptions(robot=robot, params_file=None, port=port, baud=baud)
    return describe_graph(bundle, opts, spec=spec, params=params).node_params()
