"""Start edgerl's node graph as separate processes (where only pip rclpy exists), watch it
with an in-process monitor node, optionally record it to MCAP, and stop it cleanly.

``edgerl deploy`` is a thin CLI over :func:`deploy`. The graph is the one
``launch/edgerl.launch.py`` starts on a full ROS 2 install: the robot side (``robot``:
``sim`` = ``sim_robot_node``, ``serial`` = ``serial_bridge_node`` on ``port``/``baud`` to the
edgerl firmware, ``ros`` = nothing: the robot's own driver publishes the state) +
``planner_node`` + ``edit_policy_node`` (lifecycle, autostarted), each ``python -m
edgerl_ros.<node> --ros-args -r __node:=... -p name:=value ...``.

Only ``sim_robot_node`` needs torch/MuJoCo; the result's ``torch_loaded`` says, per node
process, whether a torch library is mapped into it (``/proc/<pid>/maps``), so a real-robot
graph is checked to run on a runtime-only install.

Stopping: SIGINT to every child (rclpy shuts down cleanly), then SIGKILL after
``stop_timeout_s``; this runs in ``finally`` so nothing is left running on errors either.
"""

from __future__ import annotations

import logging
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgerl_ros import NODE_MODULES
from edgerl_ros.verdict import DEFAULT_MIN_SUCCESS, episode_verdict

__all__ = ["ROBOTS", "DeployConfig", "DeployError", "GraphProcesses", "deploy",
           "load_params_yaml", "robot_nodes", "ros_env", "to_ros_args", "torch_mapped"]

log = logging.getLogger(__name__)

PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_CONFIG = PACKAGE_DIR.parent / "config" / "edgerl.yaml"
#: What ``robot`` may be: the node that speaks for the robot (``ros``: none, the robot's
#: own ROS driver publishes ``robot/joint_states`` and takes ``robot/command``).
ROBOTS = {"sim": "sim_robot_node", "serial": "serial_bridge_node",
          "ros2_control": "ros2_control_bridge_node", "ros": None}


class DeployError(RuntimeError):
    """The graph could not be started or failed while running (message names the node)."""


# --- configuration ---------------------------------------------------------------------------
def _node_params(node: str) -> list[Any]:
    import importlib

    return list(importlib.import_module(NODE_MODULES[node]).PARAMS)


def load_params_yaml(path: str | Path | None) -> dict[str, dict[str, Any]]:
    """Read a ROS 2 parameter file (``node: {ros__parameters: {...}}``) and validate every
    value against the node's declared parameters; returns ``{node: {name: value}}``.

    Raises:
        DeployError: unreadable YAML, unknown node or parameter, or a rejected value.
    """
    import yaml

    if path is None:
        return {}
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise DeployError(f"{path}: cannot read parameter file ({exc})") from exc
    if not isinstance(data, dict):
        raise DeployError(f"{path}: expected a mapping of node names")
    out: dict[str, dict[str, Any]] = {}
    for node, body in data.items():
        node = str(node).lstrip("/")
        if node not in NODE_MODULES:
            raise DeployError(f"{path}: unknown node {node!r} (nodes: {', '.join(NODE_MODULES)})")
        if not isinstance(body, dict) or not isinstance(body.get("ros__parameters", {}), dict):
            raise DeployError(f"{path}: {node}: expected 'ros__parameters: {{...}}'")
        specs = {s.name: s for s in _node_params(node)}
        values = {}
        for name, value in (body.get("ros__parameters") or {}).items():
            if name not in specs:
                raise DeployError(f"{path}: {node}: unknown parameter {name!r} (known: "
                                  f"{', '.join(specs)})")
            if isinstance(specs[name].default, float) and isinstance(value, int) \
                    and not isinstance(value, bool):
                value = float(value)
            reason = specs[name].check(value)
            if reason is not None:
                raise DeployError(f"{path}: {node}: {reason}")
            values[name] = value
        out[node] = values
    return out


def _ros_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, int):
        return str(value)
    text = str(value).replace("'", "''")
    return f"'{text}'"


def to_ros_args(node: str, params: dict[str, Any]) -> list[str]:
    """``--ros-args -r __node:=NODE -p k:=v ...`` (values typed as YAML: floats keep a '.')."""
    args = ["--ros-args", "-r", f"__node:={node}"]
    for name, value in params.items():
        args += ["-p", f"{name}:={_ros_value(value)}"]
    return args


def ros_env(domain_id: int | None = None, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for the child processes: one ROS domain, loopback discovery only, Fast DDS,
    and ``edgerl_ros`` importable."""
    env = dict(os.environ if base is None else base)
    if domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(domain_id)
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    pkg_root = str(PACKAGE_DIR.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_root, env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


# --- processes -------------------------------------------------------------------------------
@dataclass
class GraphProcesses:
    """Child node processes with their log files; :meth:`stop` is idempotent."""

    log_dir: Path
    env: dict[str, str]
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    #: node -> the container process hosting it (composed nodes only)
    hosts: dict[str, str] = field(default_factory=dict)
    stop_timeout_s: float = 5.0

    def start(self, node: str, params: dict[str, Any],
              extra_env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start ``node`` with ``params``; ``extra_env`` adds to the graph's environment for
        this process only (e.g. its real-time priority)."""
        cmd = [sys.executable, "-m", NODE_MODULES[node], *to_ros_args(node, params)]
        log_path = self.log_dir / f"{node}.log"
        env = self.env if not extra_env else {**self.env, **extra_env}
        with open(log_path, "wb") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                    stdin=subprocess.DEVNULL)
        self.procs[node] = proc
        log.debug("started %s (pid %d): %s", node, proc.pid, " ".join(cmd))
        return proc

    def start_container(self, name: str, nodes: dict[str, dict[str, Any]],
                        extra_env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start the container ``name`` (:data:`~edgerl_ros.CONTAINERS`) hosting ``nodes``
        (``{node: params}``), their parameters in a ROS 2 parameter file beside its log."""
        import yaml

        from edgerl_ros import CONTAINERS

        params_path = self.log_dir / f"{name}.params.yaml"
        params_path.write_text(yaml.safe_dump(
            {node: {"ros__parameters": values} for node, values in nodes.items()}))
        cmd = [sys.executable, "-m", CONTAINERS[name][0], "--ros-args", "--params-file",
               str(params_path)]
        log_path = self.log_dir / f"{name}.log"
        env = self.env if not extra_env else {**self.env, **extra_env}
        with open(log_path, "wb") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                    stdin=subprocess.DEVNULL)
        self.procs[name] = proc
        for node in nodes:
            self.hosts[node] = name
        log.debug("started %s (pid %d) hosting %s", name, proc.pid, ", ".join(nodes))
        return proc

    def torch_loaded(self) -> dict[str, bool]:
        """Per running node: whether a torch shared library is mapped into its process."""
        return {node: torch_mapped(proc.pid) for node, proc in self.procs.items()
                if proc.poll() is None}

    def check_alive(self) -> None:
        """Raise :class:`DeployError` (with the log tail) if a node has exited."""
        for node, proc in self.procs.items():
            rc = proc.poll()
            if rc is not None:
                raise DeployError(f"{node} exited with status {rc}:\n{self.tail(node)}")

    def tail(self, node: str, n: int = 15) -> str:
        """The last ``n`` lines of ``node``'s log (its container's, when composed)."""
        path = self.log_dir / f"{self.hosts.get(node, node)}.log"
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])

    def stop(self) -> dict[str, int]:
        """SIGINT every child, wait, SIGKILL stragglers; returns exit codes."""
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + self.stop_timeout_s
        codes = {}
        for node, proc in self.procs.items():
            try:
                codes[node] = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop on SIGINT; killing it", node)
                proc.kill()
                codes[node] = proc.wait(timeout=5.0)
        return codes


def torch_mapped(pid: int) -> bool:
    """Whether process ``pid`` has torch loaded: a ``torch/`` shared object or ``libtorch``
    in ``/proc/<pid>/maps`` (an imported torch always maps ``torch/_C*.so``).

    Raises:
        DeployError: no ``/proc/<pid>/maps`` (not Linux, or the process is gone).
    """
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError as exc:
        raise DeployError(f"cannot read /proc/{pid}/maps: {exc}") from exc
    return any(("/torch/" in line or "libtorch" in line) and ".so" in line
               for line in maps.splitlines())


def robot_nodes(robot: str, params: dict[str, dict[str, Any]], spec: Any, bundle: Path,
                port: str = "", baud: int = 1_000_000) -> dict[str, dict[str, Any]]:
    """``{node: parameters}`` of the graph for ``robot`` (see :data:`ROBOTS`), in start order.

    Raises:
        DeployError: unknown robot, or ``serial`` without a port.
    """
    if robot not in ROBOTS:
        raise DeployError(f"robot {robot!r}: choose one of {', '.join(ROBOTS)}")
    nodes: dict[str, dict[str, Any]] = {}
    edit = {**params.get("edit_policy_node", {}), "bundle": str(bundle), "autostart": True}
    if robot == "sim":
        nodes["sim_robot_node"] = {**params.get("sim_robot_node", {}), "task": spec.task}
    elif robot == "serial":
        if not port:
            raise DeployError("robot 'serial' needs a port (--port /dev/ttyACM0)")
        nodes["serial_bridge_node"] = {
            **params.get("serial_bridge_node", {}), "port": str(port), "baudrate": int(baud),
            "bundle": str(bundle), "command_field": edit.get("command_field", "effort")}
    elif robot == "ros2_control":
        nodes["ros2_control_bridge_node"] = {
            **params.get("ros2_control_bridge_node", {}), "bundle": str(bundle),
            "command_field": edit.get("command_field", "effort")}
    nodes["planner_node"] = {**params.get("planner_node", {}), "bundle": str(bundle)}
    nodes["edit_policy_node"] = edit
    return nodes


# --- monitor ---------------------------------------------------------------------------------
class _Monitor:
    """An rclpy node in the deploy process: measures the command stream, collects
    diagnostics, records MCAP, and can inject bad messages."""

    RECORDED = {
        "state": "sensor_msgs/msg/JointState",
        "command": "sensor_msgs/msg/JointState",
        "chunk": "trajectory_msgs/msg/JointTrajectory",
        "instruction": "std_msgs/msg/String",
        "episode": "std_msgs/msg/Header",
        "diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
    }

    def __init__(self, node: Any, record: Path | None) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.serialization import deserialize_message
        from sensor_msgs.msg import JointState

        from edgerl_ros.common import (
            CHUNK_QOS,
            DIAG_QOS,
            EPISODE_QOS,
            INSTRUCTION_QOS,
            STATE_QOS,
            TOPICS,
        )
        from edgerl_ros.recording import McapRecorder
        from edgerl_ros.sources import PublisherFilter

        self.node = node
        #: only the edit node's commands count in rate and latency (anyone may publish on
        #: robot/command); the others are counted in ``commands_foreign``
        self.command_source = PublisherFilter(node, TOPICS["command"], "edit_policy_node")
        self._deser = deserialize_message
        self._types = {"command": JointState, "diagnostics": DiagnosticArray}
        self.recorder = McapRecorder(record) if record is not None else None
        self.cmd_times: list[float] = []
        self.first_stamped: float | None = None
        self.cmd_latency_s: list[float] = []
        self.diag_msgs = 0
        self.diag: dict[str, dict[str, str]] = {}
        self.lock = threading.Lock()
        qos = {"state": STATE_QOS, "command": STATE_QOS, "chunk": CHUNK_QOS,
               "instruction": INSTRUCTION_QOS, "episode": EPISODE_QOS,
               "diagnostics": DIAG_QOS}
        from rclpy.qos import QoSProfile

        for key, datatype in self.RECORDED.items():
            topic = TOPICS[key]
            full = topic if topic.startswith("/") else "/" + topic
            if self.recorder is not None:
                self.recorder.add_topic(full, datatype)
            msg_type = self._msg_type(datatype)
            # same reliability/durability as the publishers, but a deep queue: the monitor
            # records every message and must not lose any to its own scheduling
            kw = {**_qos_kwargs(qos[key]), "depth": 500}
            node.create_subscription(msg_type, topic, self._callback(key, full),
                                     QoSProfile(**kw), raw=True)

    @staticmethod
    def _msg_type(datatype: str) -> Any:
        import importlib

        pkg, _, name = datatype.split("/")
        return getattr(importlib.import_module(f"{pkg}.msg"), name)

    def _callback(self, key: str, topic: str) -> Callable[[bytes, Any], None]:
        def cb(data: bytes, info: Any) -> None:
            now_ns = time.time_ns()
            if self.recorder is not None:
                self.recorder.write(topic, data, now_ns)
            if key == "command" and self.command_source.accept(info):
                from edgerl_ros.messages import stamp_to_ns

                msg = self._deser(data, self._types["command"])
                stamp = stamp_to_ns(msg.header.stamp)
                with self.lock:
                    if stamp > 0 and self.first_stamped is None:
                        self.first_stamped = time.perf_counter()
                    self.cmd_times.append(time.perf_counter())
                    self.cmd_latency_s.append((now_ns - stamp) * 1e-9 if stamp > 0
                                              else float("nan"))
            elif key == "diagnostics":
                msg = self._deser(data, self._types["diagnostics"])
                with self.lock:
                    self.diag_msgs += 1
                    for st in msg.status:
                        self.diag[st.name] = {kv.key: kv.value for kv in st.values}
        return cb

    def first_command_time(self) -> float | None:
        """When the first command computed from a real (stamped) state arrived."""
        with self.lock:
            return self.first_stamped

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()


def _qos_kwargs(profile: Any) -> dict[str, Any]:
    return {"reliability": profile.reliability, "history": profile.history,
            "depth": profile.depth, "durability": profile.durability}


class _BadInjector:
    """Publishes malformed state and chunk messages (wrong length, NaN, unknown names,
    decreasing times) in rotation, to prove they are dropped, counted and reported."""

    def __init__(self, node: Any, obs_names: list[str], action_names: list[str]) -> None:
        from sensor_msgs.msg import JointState
        from trajectory_msgs.msg import JointTrajectory

        from edgerl_ros.common import CHUNK_QOS, STATE_QOS, TOPICS

        self.state_pub = node.create_publisher(JointState, TOPICS["state"], STATE_QOS)
        self.chunk_pub = node.create_publisher(JointTrajectory, TOPICS["chunk"], CHUNK_QOS)
        self.obs_names, self.action_names = obs_names, action_names
        self.sent = 0

    def send_one(self) -> None:
        from builtin_interfaces.msg import Duration
        from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

        from edgerl_ros.messages import make_joint_state, ns_to_stamp

        kind = self.sent % 4
        now = time.time_ns()
        n = len(self.obs_names)
        if kind == 0:  # wrong length
            msg = make_joint_state(self.obs_names, np.zeros(n + 1), now)
            self.state_pub.publish(msg)
        elif kind == 1:  # NaN
            vals = np.zeros(n)
            vals[0] = np.nan
            self.state_pub.publish(make_joint_state(self.obs_names, vals, now))
        elif kind == 2:  # unknown joint names
            names = [f"bogus_{i}" for i in range(n)]
            self.state_pub.publish(make_joint_state(names, np.zeros(n), now))
        else:  # chunk with decreasing times
            msg = JointTrajectory()
            msg.header.stamp = ns_to_stamp(now)
            msg.joint_names = list(self.action_names)
            for t in (0.02, 0.01, 0.03):
                pt = JointTrajectoryPoint()
                pt.positions = [0.0] * len(self.action_names)
                pt.time_from_start = Duration(sec=0, nanosec=int(t * 1e9))
                msg.points.append(pt)
            self.chunk_pub.publish(msg)
        self.sent += 1


# --- deploy ----------------------------------------------------------------------------------
@dataclass
class DeployConfig:
    """What ``edgerl deploy`` runs.

    Attributes:
        bundle: Bundle directory (manifest.json + policy.onnx [+ planner.onnx]).
        robot: ``sim`` (sim_robot_node runs the bundle's task), ``serial``
            (serial_bridge_node to the edgerl firmware on ``port``) or ``ros`` (the robot's
            own ROS driver publishes the state; only planner + edit policy start).
        port: Serial device for ``robot="serial"`` (``/dev/ttyACM0``, a pty).
        baud: UART baud rate for ``robot="serial"`` (ignored by USB-CDC and ptys).
        device: onnxruntime device of the planner and edit policy (``None``: the parameter
            file's).
        duration_s: Seconds to run after the first command arrives.
        params_file: ROS 2 parameter YAML (defaults: config/edgerl.yaml).
        record: Write the session's topics to this MCAP file.
        domain_id: ROS_DOMAIN_ID for the graph (default: a random one in 1..200).
        warmup_s: Start of the run excluded from rate/latency statistics (s).
        startup_timeout_s: Longest wait for the first command (s).
        inject_bad_hz: Rate of malformed messages injected (0 = none).
        instruction: Published once on planner/instruction (transient local).
        log_dir: Where node logs go (default: a temporary directory, removed on success).
        min_success: ``robot="sim"``: fraction of completed episodes that must succeed
            for ``success`` (default 1.0: every one).
        rt_priority: SCHED_FIFO priority of the processes on the state -> command path
            (:data:`RT_NODES`; 0 = normal scheduling).
        compose: Run the sim robot and the edit node in one process
            (``edgerl_ros.container``): states and commands pass by call, not middleware.
    """

    bundle: Path
    robot: str = "sim"
    port: str = ""
    baud: int = 1_000_000
    device: str | None = None
    duration_s: float = 10.0
    params_file: Path | None = DEFAULT_CONFIG
    record: Path | None = None
    domain_id: int | None = None
    warmup_s: float = 1.0
    startup_timeout_s: float = 90.0
    inject_bad_hz: float = 0.0
    instruction: str = ""
    log_dir: Path | None = None
    rt_priority: int = 0
    min_success: float = DEFAULT_MIN_SUCCESS
    compose: bool = False

    def __post_init__(self) -> None:
        if self.compose and self.robot != "sim":
            raise DeployError(f"compose runs the edit node inside the robot's process; it "
                              f"supports robot 'sim', not {self.robot!r}")
        if not 0.0 <= float(self.min_success) <= 1.0:
            raise DeployError(f"min_success must be in [0, 1], got {self.min_success}")
        if not 0 <= int(self.rt_priority) <= 99:
            raise DeployError(f"rt_priority must be 0..99, got {self.rt_priority}")


#: Nodes on the state -> command path; ``rt_priority`` makes these processes SCHED_FIFO
#: (the planner stays at normal priority: it is slow by design and must not starve them).
RT_NODES = ("edit_policy_node", "sim_robot_node", "serial_bridge_node",
            "ros2_control_bridge_node")


def rt_env(node: str, priority: int) -> dict[str, str]:
    """Extra environment for ``node``'s process: its SCHED_FIFO priority, if it is on the
    state -> command path and ``priority`` > 0."""
    from edgerl_ros.common import RT_PRIORITY_ENV

    return {RT_PRIORITY_ENV: str(int(priority))} if priority and node in RT_NODES else {}


def plan_processes(node_params: dict[str, dict[str, Any]], compose: bool
                   ) -> dict[str, tuple[str, ...] | None]:
    """Processes to start, in order: ``{process: None}`` for a node alone in its process,
    ``{container: (nodes...)}`` for composed ones (at the place of the first of them)."""
    from edgerl_ros import CONTAINERS

    out: dict[str, tuple[str, ...] | None] = {}
    hosted_by = {node: name for name, (_mod, nodes) in CONTAINERS.items() for node in nodes
                 if compose and all(n in node_params for n in nodes)}
    for node in node_params:
        container = hosted_by.get(node)
        if container is None:
            out[node] = None
        elif container not in out:
            out[container] = CONTAINERS[container][1]
    return out


def _percentile_us(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q) * 1e6) if values else float("nan")


def _as_number(text: str | None) -> float:
    try:
        return float(text) if text is not None else float("nan")
    except ValueError:
        return float("nan")


def deploy(cfg: DeployConfig, on_progress: Callable[[float], None] | None = None
           ) -> dict[str, Any]:
    """Run the graph for ``cfg.duration_s`` and return the measured summary.

    Returns a dict with ``success`` (the sim task reported a success), ``cmd_rate_hz``
    (command messages received per second after warm-up), ``configured_rate_hz`` (the
    manifest's control rate), ``e2e_latency_p50_us``/``p99_us`` (state stamp -> command
    received, across processes), ``diagnostics_seen`` (DiagnosticArray messages received),
    ``dropped_bad_msgs`` (sum over nodes) and details.

    Raises:
        DeployError: bad bundle/config, a node that exits early, no command in time.
    """
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import String

    from edgerl.spec import BundleError, load_bundle_manifest
    from edgerl_ros.common import INSTRUCTION_QOS, TOPICS

    if cfg.robot not in ROBOTS:
        raise DeployError(f"robot {cfg.robot!r}: choose one of {', '.join(ROBOTS)}")
    bundle = Path(cfg.bundle).resolve()
    try:
        spec = load_bundle_manifest(bundle)
    except (BundleError, ValueError) as exc:
        raise DeployError(f"bundle: {exc}") from exc
    params = load_params_yaml(cfg.params_file)
    if cfg.device is not None:
        for node in ("planner_node", "edit_policy_node"):
            params.setdefault(node, {})["device"] = cfg.device
    node_params = robot_nodes(cfg.robot, params, spec, bundle, cfg.port, cfg.baud)
    domain = cfg.domain_id if cfg.domain_id is not None else random.randint(1, 200)
    env = ros_env(domain)
    own_log_dir = cfg.log_dir is None
    log_dir = Path(tempfile.mkdtemp(prefix="edgerl-deploy-")) if own_log_dir \
        else Path(cfg.log_dir)  # type: ignore[arg-type]
    log_dir.mkdir(parents=True, exist_ok=True)

    saved = {k: os.environ.get(k) for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE",
                                            "RMW_IMPLEMENTATION")}
    for k in saved:
        os.environ[k] = env[k]
    context = rclpy.Context()
    rclpy.init(context=context)
    graph = GraphProcesses(log_dir=log_dir, env=env)
    node = monitor = None
    executor = None
    stop_spin = threading.Event()
    spin_thread = None
    clean = False
    result: dict[str, Any] = {}
    try:
        node = rclpy.create_node("edgerl_deploy_monitor", context=context)
        monitor = _Monitor(node, cfg.record)
        injector = _BadInjector(node, spec.observation.names, spec.action.names) \
            if cfg.inject_bad_hz > 0 else None
        if cfg.instruction:
            pub = node.create_publisher(String, TOPICS["instruction"], INSTRUCTION_QOS)
            pub.publish(String(data=cfg.instruction))
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)

        def spin() -> None:
            while not stop_spin.is_set() and context.ok():
                executor.spin_once(timeout_sec=0.05)

        spin_thread = threading.Thread(target=spin, name="deploy-monitor", daemon=True)
        spin_thread.start()
        for name, hosted in plan_processes(node_params, cfg.compose).items():
            if hosted is None:
                graph.start(name, node_params[name], rt_env(name, cfg.rt_priority))
            else:
                env_rt = {k: v for node in hosted for k, v in rt_env(node, cfg.rt_priority).items()}
                graph.start_container(name, {n: node_params[n] for n in hosted}, env_rt)

        t_start = time.perf_counter()
        while monitor.first_command_time() is None:
            graph.check_alive()
            if time.perf_counter() - t_start > cfg.startup_timeout_s:
                raise DeployError(f"no command on {TOPICS['command']} within "
                                  f"{cfg.startup_timeout_s:g} s; edit_policy_node log:\n"
                                  f"{graph.tail('edit_policy_node')}")
            time.sleep(0.05)
        t_first = monitor.first_command_time()
        t_end = t_first + cfg.duration_s  # type: ignore[operator]
        next_bad = t_first + cfg.warmup_s  # type: ignore[operator]
        while (now := time.perf_counter()) < t_end:
            graph.check_alive()
            if injector is not None and now >= next_bad:
                injector.send_one()
                next_bad += 1.0 / cfg.inject_bad_hz
            if on_progress is not None:
                on_progress(min(1.0, (now - t_first) / cfg.duration_s))  # type: ignore[operator]
            time.sleep(0.01 if injector is not None else 0.1)
        # one more diagnostics round so the final counters are in
        n_diag = monitor.diag_msgs
        wait_until = time.perf_counter() + 2.5
        while monitor.diag_msgs < n_diag + 3 and time.perf_counter() < wait_until:
            time.sleep(0.05)
        graph.check_alive()
        torch_loaded = graph.torch_loaded()
        result = _summarise(monitor, spec, cfg, t_first, t_end, domain,  # type: ignore[arg-type]
                            injector.sent if injector else 0, log_dir)
        result["torch_loaded"] = torch_loaded
        clean = True
        return result
    finally:
        codes = graph.stop()
        log.debug("node exit codes: %s", codes)
        if own_log_dir and clean:
            shutil.rmtree(log_dir, ignore_errors=True)
            result["log_dir"] = None
        elif own_log_dir:
            log.warning("node logs kept in %s", log_dir)
        stop_spin.set()
        if spin_thread is not None:
            spin_thread.join(timeout=5.0)
        if monitor is not None:
            monitor.close()
        if executor is not None:
            executor.shutdown()
        if node is not None:
            node.destroy_node()
        context.try_shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _summarise(monitor: _Monitor, spec: Any, cfg: DeployConfig, t_first: float, t_end: float,
               domain: int, bad_sent: int, log_dir: Path) -> dict[str, Any]:
    with monitor.lock:
        times = np.asarray(monitor.cmd_times)
        lat = list(monitor.cmd_latency_s)
        diag = {k: dict(v) for k, v in monitor.diag.items()}
        n_diag = monitor.diag_msgs
    t_lo = t_first + cfg.warmup_s
    steady = times[(times >= t_lo) & (times <= t_end)]
    rate = (steady.size - 1) / (steady[-1] - steady[0]) if steady.size > 2 else float("nan")
    lat_arr = np.asarray(lat, dtype=np.float64)  # aligned with times (NaN: no stamp)
    steady_lat = lat_arr[(times >= t_lo) & (times <= t_end)] if lat_arr.size else lat_arr
    steady_lat = list(steady_lat[np.isfinite(steady_lat)])
    robot = diag.get("edgerl: sim_robot_node", {})
    serial = diag.get("edgerl: serial_bridge_node", {})
    edit = diag.get("edgerl: edit_policy_node", {})
    dropped = sum(int(_as_number(d.get("dropped_bad_msgs")) or 0) for d in diag.values()
                  if math.isfinite(_as_number(d.get("dropped_bad_msgs"))))
    successes = _as_number(robot.get("successes"))
    verdict = episode_verdict(successes, _as_number(robot.get("episodes")), cfg.min_success)
    if cfg.robot == "sim":  # the task says so, in at least min_success of the episodes
        success = bool(verdict["success"])
    elif cfg.robot == "serial":  # linked, and the firmware applied our setpoints
        success = serial.get("connected") == "True" and \
            _as_number(serial.get("setpoints_acked")) > 0 and steady.size > 0
    else:  # a robot we cannot see into: commands flowed
        success = bool(steady.size > 0)
    return {
        "success": success,
        **({k: v for k, v in verdict.items() if k != "success"} if cfg.robot == "sim" else {}),
        "commands_foreign": monitor.command_source.foreign,
        "robot_kind": cfg.robot,
        "cmd_rate_hz": float(rate),
        "configured_rate_hz": float(spec.control_hz),
        # measured where the command lands: the robot process (state publish -> command in)
        "e2e_latency_p50_us": _as_number(robot.get("e2e_latency_p50_us")),
        "e2e_latency_p99_us": _as_number(robot.get("e2e_latency_p99_us")),
        "diagnostics_seen": int(n_diag),
        "dropped_bad_msgs": int(dropped),
        "monitor_latency_p50_us": _percentile_us(steady_lat, 50),
        "monitor_latency_p99_us": _percentile_us(steady_lat, 99),
        "task": spec.task,
        "method": spec.method,
        "duration_s": float(cfg.duration_s),
        "commands": int(steady.size),
        "episodes": int(episodes) if math.isfinite(episodes := _as_number(
            robot.get("episodes"))) else 0,
        "robot_step_rate_hz": _as_number(robot.get("step_rate_hz")),
        "robot": robot or serial,
        "serial_rtt_p50_us": _as_number(serial.get("rtt_p50_us")),
        "serial_rtt_p99_us": _as_number(serial.get("rtt_p99_us")),
        "serial_setpoints_acked": _as_number(serial.get("setpoints_acked")),
        "successes": int(successes) if math.isfinite(successes) else 0,
        "bad_msgs_injected": int(bad_sent),
        "diagnostics_sources": sorted(diag),
        "edit_tick_compute_p50_us": _as_number(edit.get("tick_compute_p50_us")),
        "edit_inference": edit.get("inference"),
        "edit_tick_compute_p99_us": _as_number(edit.get("tick_compute_p99_us")),
        "edit_tick_policy_p50_us": _as_number(edit.get("tick_policy_p50_us")),
        "edit_tick_policy_p99_us": _as_number(edit.get("tick_policy_p99_us")),
        "edit_publish_p50_us": _as_number(edit.get("publish_p50_us")),
        "edit_publish_p99_us": _as_number(edit.get("publish_p99_us")),
        "edit_trigger": edit.get("trigger"),
        "edit_inline_tick": edit.get("inline_tick") == "True",
        "rt_priority": int(cfg.rt_priority),
        "edit_rt_priority_applied": edit.get("rt_priority_applied") == "True",
        "edit_trigger_timeouts": _as_number(edit.get("trigger_timeouts")),
        "edit_deadline_misses": _as_number(edit.get("deadline_misses")),
        "edit_state_age_at_tick_p50_ms": _as_number(edit.get("state_age_at_tick_p50_ms")),
        "edit_state_age_at_tick_p99_ms": _as_number(edit.get("state_age_at_tick_p99_ms")),
        "ros_domain_id": domain,
        "record": str(cfg.record) if cfg.record else None,
        "log_dir": str(log_dir),
    }
