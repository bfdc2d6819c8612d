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

The pieces: :mod:`edgerl_ros.graph_description` (which nodes with which parameters, from
the bundle's manifest: the same description the launch file starts),
:mod:`edgerl_ros.graph_config` (parameter files, command lines, which nodes in which
processes), :mod:`edgerl_ros.processes` (start/stop), :mod:`edgerl_ros.monitor` (the
command stream, diagnostics, MCAP), :mod:`edgerl_ros.fault_inject` (bad inputs) and
:mod:`edgerl_ros.summary` (the result); this module runs them in order.

Stopping: SIGINT to every child (rclpy shuts down cleanly), then SIGKILL after
``stop_timeout_s``; this runs in ``finally`` so nothing is left running on errors either.
"""

from __future__ import annotations

import contextlib
import logging
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgerl_ros.fault_inject import BadMessageInjector
from edgerl_ros.foxglove_live import LiveConfig, live_view
from edgerl_ros.graph_config import (
    DEFAULT_CONFIG,
    ROBOTS,
    RT_NODES,
    DeployError,
    load_params_yaml,
    plan_processes,
    ros_env,
    rt_env,
    to_ros_args,
)
from edgerl_ros.graph_description import GraphOptions, describe_graph, robot_nodes
from edgerl_ros.monitor import GraphMonitor
from edgerl_ros.processes import GraphProcesses, torch_mapped
from edgerl_ros.session import MonitorSession
from edgerl_ros.summary import summarise
from edgerl_ros.verdict import DEFAULT_MIN_SUCCESS

__all__ = ["COMPOSABLE_ROBOTS", "DEFAULT_CONFIG", "ROBOTS", "RT_NODES", "DeployConfig",
           "DeployError", "GraphProcesses", "deploy", "load_params_yaml", "plan_processes",
           "robot_nodes", "ros_env", "rt_env", "to_ros_args", "torch_mapped"]

log = logging.getLogger(__name__)

#: Robot kinds whose node can host the edit node (``edgerl_ros.container``).
COMPOSABLE_ROBOTS = ("sim", "serial")


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
        record_transitions: The edit node writes its loop's transitions and the operator
            interventions it accepted to this JSON-MCAP (``edgerl finetune
            --interventions``; node parameter ``transitions_file``).
        domain_id: ROS_DOMAIN_ID for the graph (default: a random one in 1..200).
        warmup_s: Start of the run excluded from rate/latency statistics (s).
        startup_timeout_s: Longest wait for the first command (s).
        inject_bad_hz: Rate of malformed messages injected (0 = none).
        instruction: Published once on planner/instruction (transient local).
        log_dir: Where node logs go (default: a temporary directory, removed on success).
        min_success: ``robot="sim"``: fraction of completed episodes that must succeed
            for ``success`` (default None: the episodes are reported as k/n and ``success``
            says only that commands flowed).
        rt_priority: SCHED_FIFO priority of the processes on the state -> command path
            (:data:`RT_NODES`; 0 = normal scheduling).
        compose: Run the robot node (``sim`` or ``serial``) and the edit node in one process
            (``edgerl_ros.container``): states and commands pass by call, not middleware.
        keystore: SROS2 keystore (``edgerl ros-keystore``): every process runs in its own
            enclave with ``ROS_SECURITY_STRATEGY=Enforce`` (:mod:`edgerl_ros.security`);
            where this install cannot enforce DDS security, :func:`deploy` refuses before
            starting anything.
        baseline_rtt_s: Seconds of a bare rclpy round trip measured before the graph starts
            (0 = none): the transport floor beside the e2e latency, in the same run.
        operator_key: Operator key file (``edgerl operator keygen``) the edit node and the
            serial bridge trust for e-stop re-arms and interventions (default: the file
            named by ``EDGERL_OPERATOR_KEY``; none: they refuse every re-arm and override).
        foxglove: Serve state, commands (with their latency), chunks and diagnostics live to
            Foxglove over its WebSocket protocol at this address (``None``: no server;
            :mod:`edgerl_ros.foxglove_live`, needs ``edgerl[live]``); stopped with the graph.
    """

    bundle: Path
    robot: str = "sim"
    port: str = ""
    baud: int = 1_000_000
    device: str | None = None
    duration_s: float = 10.0
    params_file: Path | None = DEFAULT_CONFIG
    record: Path | None = None
    record_transitions: Path | None = None
    domain_id: int | None = None
    warmup_s: float = 1.0
    startup_timeout_s: float = 90.0
    inject_bad_hz: float = 0.0
    instruction: str = ""
    log_dir: Path | None = None
    rt_priority: int = 0
    min_success: float | None = DEFAULT_MIN_SUCCESS
    compose: bool = False
    keystore: Path | None = None
    operator_key: Path | None = None
    foxglove: LiveConfig | None = None
    baseline_rtt_s: float = 0.0

    def __post_init__(self) -> None:
        if self.compose and self.robot not in COMPOSABLE_ROBOTS:
            raise DeployError(f"compose runs the edit node inside the robot's process; it "
                              f"supports robot {' or '.join(map(repr, COMPOSABLE_ROBOTS))}, "
                              f"not {self.robot!r}")
        if not 0.0 <= float(self.baseline_rtt_s) <= 600.0:
            raise DeployError(f"baseline_rtt_s must be in [0, 600] s, got {self.baseline_rtt_s}")
        if self.min_success is not None and not 0.0 <= float(self.min_success) <= 1.0:
            raise DeployError(f"min_success must be in [0, 1], got {self.min_success}")
        if not 0 <= int(self.rt_priority) <= 99:
            raise DeployError(f"rt_priority must be 0..99, got {self.rt_priority}")
        if self.keystore is not None and self.inject_bad_hz > 0:
            raise DeployError("inject_bad_hz publishes state and chunk messages from the "
                              "monitor, which its enclave does not allow; run the robustness "
                              "check without a keystore")


def deploy(cfg: DeployConfig, on_progress: Callable[[float], None] | None = None
           ) -> dict[str, Any]:
    """Run the graph for ``cfg.duration_s`` and return the measured summary.

    Returns a dict with ``success`` (the sim task reported a success), ``cmd_rate_hz``
    (command messages received per second after warm-up), ``configured_rate_hz`` (the
    manifest's control rate), ``e2e_latency_p50_us``/``p99_us`` (state stamp -> command
    received, across processes), ``diagnostics_seen`` (DiagnosticArray messages received),
    ``dropped_bad_msgs`` (sum over nodes), ``graph`` (the graph it started: task, robot,
    rates, trigger, nodes; :meth:`~edgerl_ros.graph_description.GraphDescription.summary`)
    and details.

    Raises:
        DeployError: bad bundle/config, a node that exits early, no command in time; with
            ``cfg.keystore``, before anything starts: DDS security unavailable here (the
            reason), or a keystore that does not fit the graph.
    """
    from edgerl.contract.spec import BundleError, load_bundle_manifest

    if cfg.robot not in ROBOTS:
        raise DeployError(f"robot {cfg.robot!r}: choose one of {', '.join(ROBOTS)}")
    if cfg.keystore is not None:  # first: an install that cannot enforce it starts nothing
        from edgerl_ros.security import security_supported

        ok, reason = security_supported()
        if not ok:
            raise DeployError(f"--keystore: {reason}")
    bundle = Path(cfg.bundle).resolve()
    try:
        spec = load_bundle_manifest(bundle)
    except (BundleError, ValueError) as exc:
        raise DeployError(f"bundle: {exc}") from exc
    graph = describe_graph(bundle, GraphOptions(  # the launch file's graph, from the manifest
        robot=cfg.robot, params_file=cfg.params_file, port=cfg.port, baud=cfg.baud,
        device=cfg.device, rt_priority=cfg.rt_priority), spec=spec)
    log.info("%s", graph.describe())
    node_params = graph.node_params()
    if cfg.record_transitions is not None:  # absolute: the node runs in its own process
        node_params["edit_policy_node"]["transitions_file"] = \
            str(Path(cfg.record_transitions).resolve())
    secure, domain_id = _graph_security(cfg, node_params)
    domain = domain_id if domain_id is not None else random.randint(1, 200)
    env = ros_env(domain)
    env.update(_operator_env(cfg.operator_key))
    own_log_dir = cfg.log_dir is None
    log_dir = Path(tempfile.mkdtemp(prefix="edgerl-deploy-")) if own_log_dir \
        else Path(cfg.log_dir)  # type: ignore[arg-type]
    log_dir.mkdir(parents=True, exist_ok=True)

    baseline = _bare_round_trip(cfg, spec, domain) if cfg.baseline_rtt_s > 0 else None
    with (secure.monitor_environ() if secure else contextlib.nullcontext()), \
            MonitorSession(env, "edgerl_deploy_monitor") as ros, \
            live_view(ros.context, cfg.foxglove):  # stopped before the session's context
        result = _run_graph(cfg, spec, node_params, ros, env, domain, log_dir, own_log_dir,
                            on_progress, secure)
    result["graph"] = graph.summary()
    if baseline is not None:
        result.update(_against_baseline(result, baseline))
    return result


def _bare_round_trip(cfg: DeployConfig, spec: Any, domain: int) -> dict[str, Any]:
    """The transport floor measured in this run, before the graph starts: a bare rclpy
    ``JointState`` round trip between two processes at the control rate, their scheduling
    as the graph's state -> command nodes (``cfg.rt_priority``), on a domain of its own."""
    from edgerl_ros.roundtrip import measure

    hz = float(spec.control_hz)
    return measure(n=max(50, int(cfg.baseline_rtt_s * hz)), period_s=1.0 / hz,
                   domain_id=(domain % 200) + 1, rt_priority=cfg.rt_priority)


def _against_baseline(result: dict[str, Any], rtt: dict[str, Any]) -> dict[str, Any]:
    """``bare_rtt`` and the e2e p99 over it, in the callback and on the wire (the same
    receive point on both sides; NaN where one is missing)."""
    def ratio(ours: Any, ref: Any) -> float:
        try:
            return round(float(ours) / float(ref), 3)
        except (TypeError, ValueError, ZeroDivisionError):
            return float("nan")

    robot = result.get("robot") or {}
    return {"bare_rtt": rtt,
            "e2e_over_bare_rtt_p99": ratio(result.get("e2e_latency_p99_us"),
                                           rtt.get("rtt_p99_us")),
            "e2e_wire_over_bare_rtt_p99": ratio(robot.get("e2e_wire_latency_p99_us"),
                                                rtt.get("rtt_wire_p99_us"))}


def _operator_env(path: Path | None) -> dict[str, str]:
    """The graph's ``EDGERL_OPERATOR_KEY`` for ``path`` (checked now, so a bad key file fails
    before anything starts); ``{}`` leaves the environment's."""
    from edgerl.contract.operator_auth import ENV_KEY, OperatorAuthError, load_operator_key

    try:
        key = load_operator_key(path)
    except OperatorAuthError as exc:
        raise DeployError(f"operator key: {exc}") from exc
    if key is None:
        log.warning("no operator key (--operator-key / EDGERL_OPERATOR_KEY): the graph "
                    "refuses every e-stop re-arm and override")
        return {}
    return {ENV_KEY: str(Path(path).resolve())} if path is not None else {}


def _graph_security(cfg: DeployConfig, node_params: dict[str, dict[str, Any]]
                    ) -> tuple[Any, int | None]:
    """``cfg.keystore``'s :class:`~edgerl_ros.security.GraphSecurity` for the processes
    this graph starts (``None`` without a keystore) and the ROS domain to use."""
    if cfg.keystore is None:
        return None, cfg.domain_id
    from edgerl_ros.security import KeystoreError, graph_security

    try:
        return graph_security(cfg.keystore, cfg.robot,
                              list(plan_processes(node_params, cfg.compose)), cfg.domain_id)
    except KeystoreError as exc:
        raise DeployError(f"--keystore: {exc}") from exc


def _run_graph(cfg: DeployConfig, spec: Any, node_params: dict[str, dict[str, Any]],
               ros: MonitorSession, env: dict[str, str], domain: int, log_dir: Path,
               own_log_dir: bool, on_progress: Callable[[float], None] | None,
               secure: Any = None) -> dict[str, Any]:
    """Start the processes, watch them for ``cfg.duration_s``, summarise; stops them and
    keeps or removes the logs whatever happens."""
    from std_msgs.msg import String

    from edgerl_ros.common import INSTRUCTION_QOS, TOPICS

    graph = GraphProcesses(log_dir=log_dir, env=env)
    monitor = None
    clean = False
    result: dict[str, Any] = {}
    try:
        node = ros.node
        monitor = GraphMonitor(node, cfg.record)
        injector = BadMessageInjector(node, spec.observation.names, spec.action.names) \
            if cfg.inject_bad_hz > 0 else None
        if cfg.instruction:
            pub = node.create_publisher(String, TOPICS["instruction"], INSTRUCTION_QOS)
            pub.publish(String(data=cfg.instruction))
        ros.spin()
        for name, hosted in plan_processes(node_params, cfg.compose).items():
            env_sec = secure.process_env(name) if secure is not None else {}  # its enclave
            if hosted is None:
                graph.start(name, node_params[name],
                            {**rt_env(name, cfg.rt_priority), **env_sec})
            else:  # composed: SCHED_FIFO if any of its nodes is on the fast path
                env_rt = {k: v for n in hosted for k, v in rt_env(n, cfg.rt_priority).items()}
                graph.start_container(name, {n: node_params[n] for n in hosted},
                                      {**env_rt, **env_sec})

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
        result = summarise(monitor, spec, cfg, t_first, t_end, domain,  # type: ignore[arg-type]
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
        ros.stop_spinning()  # no recorder callback after this
        if monitor is not None:
            monitor.close()
