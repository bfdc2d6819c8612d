"""Run one soak: the deploy graph (sim robot + planner + edit node, separate processes over
rclpy) at ``rate_hz`` with the planner SIGKILLed and restarted every ``kill_every_s``, bad
messages on every topic, and the serial HIL path beside it; returns the report dict."""

from __future__ import annotations

import logging
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.apps.soak.config import SoakConfig, SoakError
from edgerl.apps.soak.procs import RssTrack, fifo_permitted, rss_mb
from edgerl.apps.soak.serial_leg import SerialLeg
from edgerl.apps.soak.watch import CommandWatch, DiagTotals, as_number

__all__ = ["run_soak"]

log = logging.getLogger(__name__)

WARMUP_S = 5.0  # after the first command: the command rate is measured from here on
STARTUP_TIMEOUT_S = 30.0
PLANNER = "planner_node"


def _graph_params(cfg: SoakConfig, spec: Any, bundle: Path) -> dict[str, dict[str, Any]]:
    from edgerl_ros.graph import DEFAULT_CONFIG, load_params_yaml, robot_nodes

    params = load_params_yaml(DEFAULT_CONFIG)
    edit = params.setdefault("edit_policy_node", {})
    robot = params.setdefault("sim_robot_node", {})
    edit["rate_hz"] = robot["rate_hz"] = float(cfg.rate_hz)
    edit["rt_priority"] = int(cfg.rt_priority)
    robot["rt_priority"] = max(0, int(cfg.rt_priority) - 10)
    params.setdefault(PLANNER, {})["device"] = "cpu"
    edit["device"] = "cpu"
    return robot_nodes("sim", params, spec, bundle)


def run_soak(cfg: SoakConfig, on_progress: Callable[[float], None] | None = None
             ) -> dict[str, Any]:
    """Run the soak described by ``cfg``; everything started here is stopped on return.

    Raises:
        SoakError: bad config or bundle, no ROS 2, or the graph never produced a command.
    """
    cfg.check()
    try:
        from diagnostic_msgs.msg import DiagnosticArray
        from edgerl_ros.common import DIAG_QOS, STATE_QOS, TOPICS
        from edgerl_ros.graph import DeployError, GraphProcesses, ros_env
        from edgerl_ros.session import MonitorSession, qos_kwargs
        from edgerl_ros.sources import PublisherFilter
        from rclpy.qos import QoSProfile
        from sensor_msgs.msg import JointState
    except ImportError as exc:
        raise SoakError(f"ROS 2 support is not installed ({exc}); install edgerl[ros] and "
                        "ros2_ws/src/edgerl_ros (make venv)") from exc
    from edgerl.contract.spec import BundleError, load_bundle_manifest

    bundle = Path(cfg.bundle).resolve()
    try:
        spec = load_bundle_manifest(bundle)
        node_params = _graph_params(cfg, spec, bundle)
    except (BundleError, ValueError, DeployError) as exc:
        raise SoakError(f"bundle: {exc}") from exc
    field = node_params["edit_policy_node"].get("command_field", "effort")
    low, high = np.asarray(spec.action.low), np.asarray(spec.action.high)
    domain = cfg.domain_id if cfg.domain_id is not None else random.randint(1, 200)
    env = ros_env(domain)
    own_logs = cfg.log_dir is None
    log_dir = Path(tempfile.mkdtemp(prefix="edgerl-soak-")) if own_logs else Path(cfg.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    # the soak is the operator: a key for this run, trusted by the edit node (through the
    # environment); the injector forges messages under the same key id without the secret
    from edgerl.contract.operator_auth import ENV_KEY, OperatorKey

    op_key = OperatorKey.generate("soak-operator")
    env[ENV_KEY] = str(op_key.save(log_dir / "operator.key", force=True))
    rt_ok = fifo_permitted(cfg.rt_priority)

    with MonitorSession(env, "edgerl_soak_monitor") as ros:
        graph = GraphProcesses(log_dir=log_dir, env=env)
        serial = SerialLeg(cfg.serial_faults, cfg.serial_steps, cfg.rt_priority if rt_ok else 0,
                           env) if cfg.serial else None
        clean = False
        try:
            from edgerl.apps.soak.inject import BadMessageInjector

            node = ros.node
            filt = PublisherFilter(node, TOPICS["command"], "edit_policy_node")
            watch = CommandWatch(spec.action.names, low, high, np.clip(0.0, low, high), field,
                                 filt.accept)
            diags = DiagTotals()

            def on_diag(msg: Any, info: Any) -> None:
                for st in msg.status:
                    values = {kv.key: kv.value for kv in st.values}
                    diags.update(st.name, values)
                    if st.name == "edgerl: edit_policy_node" and "state" in values:
                        resets = values.get("estop_resets")
                        watch.set_estopped(values["state"] == "estop",
                                           int(info.get("source_timestamp") or time.time_ns()),
                                           int(resets) if resets is not None else None)

            node.create_subscription(JointState, TOPICS["command"], watch.on_command,
                                     QoSProfile(**{**qos_kwargs(STATE_QOS), "depth": 500}))
            node.create_subscription(DiagnosticArray, TOPICS["diagnostics"], on_diag, DIAG_QOS)
            injector = BadMessageInjector(node, spec.observation.names, spec.action.names, field,
                                          forge_key_id=op_key.key_id)
            ros.spin()
            for name, values in node_params.items():
                graph.start(name, values)
            t0 = time.monotonic()
            while watch.commands == 0:
                _check_startup(graph, t0, filt)
                time.sleep(0.05)
            if serial is not None:
                serial.start()
            operator = Operator(node, cfg.rearm_after_s, watch, op_key)
            loop = _SoakLoop(cfg, graph, node_params, injector, watch, operator)
            loop.run(on_progress)
            if serial is not None:
                serial.stop()
            time.sleep(2.5)  # the last diagnostics round
            result = _report(cfg, loop, watch, diags, injector, serial, rt_ok, domain, log_dir,
                             filt)
            clean = result["crashes"] == 0
            return result
        finally:
            if serial is not None:
                serial.stop()
            graph.stop()
            ros.stop_spinning()
            if own_logs and clean:
                shutil.rmtree(log_dir, ignore_errors=True)


def _check_startup(graph: Any, t0: float, filt: Any) -> None:
    for name, proc in graph.procs.items():
        if proc.poll() is not None:
            raise SoakError(f"{name} exited with status {proc.returncode} at startup:\n"
                            f"{graph.tail(name)}")
    if time.monotonic() - t0 > STARTUP_TIMEOUT_S:
        raise SoakError(f"no command from edit_policy_node within {STARTUP_TIMEOUT_S:g} s "
                        f"({filt.foreign} from other publishers):\n"
                        f"{graph.tail('edit_policy_node')}")


class Operator:
    """The soak's operator: re-arms the e-stop (``robot/estop_reset``, fresh and signed with
    the run's operator key) once the edit node has reported it latched for ``rearm_after_s``,
    then at most every ``rearm_after_s`` while it stays latched (0: never)."""

    def __init__(self, node: Any, rearm_after_s: float, watch: CommandWatch, key: Any) -> None:
        from edgerl_ros.operator import OperatorPublisher

        self.rearm_after_ns = int(rearm_after_s * 1e9)
        self.watch = watch
        self.console = OperatorPublisher(node, key)
        self.rearms = 0

    def poll(self, now_ns: int) -> bool:
        """Re-arm if due at wall time ``now_ns``; returns whether it published."""
        since = self.watch.estopped_since_ns
        if not self.rearm_after_ns or since is None:
            return False
        if now_ns - since < self.rearm_after_ns:
            return False
        self.console.rearm(now_ns)
        self.watch.rearmed(now_ns)
        self.rearms += 1
        return True


class _SoakLoop:
    """The timed part: planner kills, bad messages, RSS samples, crash watch."""

    def __init__(self, cfg: SoakConfig, graph: Any, node_params: dict[str, dict[str, Any]],
                 injector: Any, watch: CommandWatch, operator: Operator) -> None:
        self.cfg, self.graph, self.node_params = cfg, graph, node_params
        self.injector, self.watch, self.operator = injector, watch, operator
        # a process's first seconds are model loading, not growth (30 s; less in short runs
        # and with frequent planner kills, so each planner is still sampled)
        warm = min(30.0, 0.25 * cfg.minutes * 60.0,
                   0.5 * cfg.kill_every_s if cfg.kill_every_s > 0 else 30.0)
        self.rss: dict[str, RssTrack] = {n: RssTrack(warmup_s=warm)
                                         for n in [*node_params, "soak"]}
        self.kills = self.restarts = 0
        self.crashes: list[str] = []
        self.cmd_rate_hz = float("nan")
        self.elapsed_s = 0.0

    def run(self, on_progress: Callable[[float], None] | None) -> None:
        cfg = self.cfg
        duration = cfg.minutes * 60.0
        t0 = time.monotonic()
        next_kill = t0 + cfg.kill_every_s if cfg.kill_every_s > 0 else float("inf")
        next_bad = t0 + (1.0 / cfg.bad_hz if cfg.bad_hz > 0 else float("inf"))
        next_rss = t0
        cmds0, t_rate0 = None, 0.0
        while (now := time.monotonic()) < t0 + duration and not self._crashed():
            if now >= next_kill:
                log.info("t=%.1f s: planner kill", now - t0)
                self._kill_planner()
                next_kill += cfg.kill_every_s
            self.operator.poll(time.time_ns())
            while now >= next_bad:
                self.injector.send_one()
                next_bad += 1.0 / cfg.bad_hz
            if now >= next_rss:
                if cmds0 is None and now >= t0 + WARMUP_S:
                    cmds0, t_rate0 = self.watch.commands, now
                self._sample_rss()
                next_rss += cfg.sample_every_s
            if on_progress is not None:
                on_progress(min(1.0, (now - t0) / duration))
            time.sleep(0.005)
        self.elapsed_s = time.monotonic() - t0
        self._sample_rss()
        if cmds0 is not None and time.monotonic() > t_rate0:
            self.cmd_rate_hz = (self.watch.commands - cmds0) / (time.monotonic() - t_rate0)

    def _kill_planner(self) -> None:
        log.info("killing the planner (pid %d)", self.graph.procs[PLANNER].pid)
        proc = self.graph.procs[PLANNER]
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10.0)
            self.kills += 1
        self.graph.start(PLANNER, self.node_params[PLANNER])
        self.restarts += 1

    def _crashed(self) -> bool:
        """Record nodes that exited on their own; restart a dead planner, stop otherwise."""
        for name, proc in list(self.graph.procs.items()):
            if proc.poll() is None:
                continue
            self.crashes.append(f"{name} exited with status {proc.returncode}:\n"
                                f"{self.graph.tail(name)}")
            if name != PLANNER:
                return True
            self.graph.start(PLANNER, self.node_params[PLANNER])
            self.restarts += 1
        return False

    def _sample_rss(self) -> None:
        now = time.monotonic()
        for name, proc in self.graph.procs.items():
            self.rss[name].add(proc.pid, rss_mb(proc.pid), now)
        self.rss["soak"].add(os.getpid(), rss_mb(os.getpid()), now)


def _report(cfg: SoakConfig, loop: _SoakLoop, watch: CommandWatch, diags: DiagTotals,
            injector: Any, serial: SerialLeg | None, rt_ok: bool, domain: int,
            log_dir: Path, filt: Any) -> dict[str, Any]:
    edit = diags.latest.get("edgerl: edit_policy_node", {})
    robot = diags.latest.get("edgerl: sim_robot_node", {})
    st = serial.totals if serial is not None else None
    serial_unsafe = st.corrupted_executed if st is not None else 0
    serial_crashes = st.crashes if st is not None else 0
    with watch.lock:
        unsafe_by = dict(watch.unsafe)
        examples = list(watch.unsafe_examples)
    unsafe = int(sum(unsafe_by.values())) + serial_unsafe
    crashes = len(loop.crashes) + serial_crashes
    # operator messages the edit node accepted beyond the soak operator's signed re-arms: an
    # unsigned or forged one got through
    op_accepted = diags.total("operator_accepted", "edgerl: edit_policy_node")
    op_breaches = max(0, op_accepted - loop.operator.rearms)
    out: dict[str, Any] = {
        "verdict": "ok" if unsafe == 0 and crashes == 0 and op_breaches == 0 else "FAIL",
        "unsafe_commands": unsafe,
        "crashes": crashes,
        "minutes": round(loop.elapsed_s / 60.0, 3),
        "rate_hz": cfg.rate_hz,
        "cmd_rate_hz": round(loop.cmd_rate_hz, 2),
        "rt_priority": cfg.rt_priority,
        "rt_permitted": rt_ok,
        "rt_applied_edit_node": edit.get("rt_priority_applied") == "True",
        "commands_checked": watch.commands,
        "commands_foreign": filt.foreign,
        "commands_while_estopped": watch.commands_while_estopped,
        "unsafe_by_reason": {**unsafe_by, "serial corrupted_executed": serial_unsafe},
        "unsafe_examples": examples,
        "crash_logs": loop.crashes + (st.crash_logs if st is not None else []),
        "planner_kills": loop.kills,
        "operator_rearms": loop.operator.rearms,
        "operator_accepted": op_accepted,
        "operator_unauthenticated_accepted": op_breaches,
        "operator_refused_by_reason": diags.by_prefix("operator_refused "),
        "commands_refused_foreign": diags.total("dropped robot/command foreign"),
        "planner_restarts": loop.restarts,
        "rss": {name: track.summary() for name, track in loop.rss.items()},
        "deadline_misses": diags.total("deadline_misses", "edgerl: edit_policy_node"),
        "edit_ticks": diags.by_prefix("ticks "),
        "safety": diags.by_prefix("safety "),
        # the escalation ladder's steps entered (hold / decay / estop), where published
        "escalations": diags.by_prefix("escalation "),
        "estop_ticks": diags.total("safety estop", "edgerl: edit_policy_node"),
        "edit_state_last": edit.get("state"),
        "edit_states_seen": sorted(diags.states_seen.get("edgerl: edit_policy_node", set())),
        "bad_sent": injector.total,
        "bad_sent_by_kind": dict(injector.sent),
        "bad_refused": diags.total("dropped_bad_msgs"),
        "bad_refused_by_node": {n.removeprefix("edgerl: "): diags.total("dropped_bad_msgs", n)
                                for n in sorted(diags.latest)},
        "bad_refused_by_reason": diags.by_prefix("dropped "),
        "robot_episodes": as_number(robot.get("episodes")),
        "diagnostics_seen": diags.messages,
        "ros_domain_id": domain,
        "log_dir": str(log_dir),
    }
    if st is not None:
        out["serial"] = {k: v for k, v in st.__dict__.items()
                         if k not in ("unplug_safe_entry_ms", "link_down_ms", "crash_logs")}
        for key in ("unplug_safe_entry_ms", "link_down_ms"):
            vals = getattr(st, key)
            out["serial"][f"{key}_max"] = round(max(vals), 3) if vals else None
            out["serial"][f"{key}_p50"] = round(float(np.median(vals)), 3) if vals else None
    return out
