"""``edgerl deploy --bundle B --robot sim|serial|ros``: run the ROS 2 node graph (robot side +
planner + edit policy) as separate processes over pip rclpy, measure it, stop it cleanly.

``--robot serial --port /dev/ttyACM0 --baud 1000000`` drives the edgerl firmware through
``serial_bridge_node``; ``--robot ros`` starts only the planner and the edit policy (the
robot's own ROS driver publishes the state). Neither loads torch (``torch_loaded``).

``--keystore DIR`` (from ``edgerl ros-keystore``) runs every process in its own SROS2
enclave with DDS security enforced; where this ROS 2 cannot enforce it, deploy stops with
the reason before starting anything."""

from __future__ import annotations

import argparse
import signal
import tempfile
from pathlib import Path
from typing import Any

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

HELP = "run the ROS 2 node graph (robot + planner + edit policy) as processes and measure it"

SUMMARY_KEYS = ("success", "task_success", "successes_of", "success_rate", "cmd_rate_hz",
                "configured_rate_hz", "e2e_latency_p50_us", "e2e_latency_p99_us",
                "e2e_over_bare_rtt_p99", "e2e_wire_over_bare_rtt_p99",
                "diagnostics_seen", "dropped_bad_msgs", "torch_loaded")


def add_arguments(p: argparse.ArgumentParser) -> None:
    flags.add_bundle_flags(p, required=True)
    robot = p.add_argument_group("robot")
    robot.add_argument("--robot", default="sim", choices=("sim", "serial", "ros2_control", "ros"),
                       help="robot to drive: sim = sim_robot_node running the bundle's task; "
                            "serial = the edgerl firmware on --port; ros2_control = "
                            "ros2_control_bridge_node (/joint_states + a controller, mapped in "
                            "--params); ros = the robot's own ROS driver speaks edgerl's topics "
                            "(only planner + edit policy start)")
    robot.add_argument("--port", default="", help="serial device for --robot serial")
    robot.add_argument("--baud", type=int, default=1_000_000,
                       help="UART baud rate for --robot serial (default 1000000)")
    robot.add_argument("--min-success", type=float, default=None, metavar="FRACTION",
                       help="--robot sim: fail (exit 2) unless this fraction of the completed "
                            "episodes reach the task's success (default: no threshold; the "
                            "report gives successes_of 'k/n' and success_rate either way)")
    _graph_flags(p)
    flags.add_compute_flags(p, device=(None, "onnxruntime device of the planner and edit "
                                             "policy (default: the parameter file's, auto)"),
                            device_choices=("auto", "cpu", "cuda", "tensorrt"))
    flags.add_rt_flags(p, "the state -> command nodes (robot side, edit policy; needs "
                          "CAP_SYS_NICE or an rtprio limit; refused priorities are reported, "
                          "the nodes then run normally)", metavar="N",
                       loop_cpus="the edit node's loop thread", unpinned=None,
                       unpinned_text="default: the params file's loop_cpus; keep other nodes "
                                     "off them")
    out = flags.add_output_flags(p, json="the summary as JSON", latency_model=(
        "write the measured planner delay (chunk stamp -> arrival, from the recording) as a "
        "latency model for `edgerl train --latency-model`; records to FILE.mcap when --record "
        "is not given"))
    out.add_argument("--record", type=Path, default=None, help="write the topics to this MCAP")
    out.add_argument("--record-transitions", type=Path, default=None, metavar="FILE",
                     help="the edit node records its loop's transitions and the operator "
                          "interventions it accepts (operator/intervention) to this MCAP, the "
                          "input of `edgerl finetune --interventions`")
    out.add_argument("--log-dir", type=Path, default=None, help="keep node logs here")
    live = p.add_argument_group("live view (Foxglove)")
    live.add_argument("--foxglove", type=int, default=0, metavar="PORT",
                      help="serve state, commands (with e2e latency), chunks and diagnostics "
                           "to Foxglove on this port (Open connection -> Foxglove WebSocket -> "
                           "ws://HOST:PORT; 0 = off, the default; needs edgerl[live])")
    live.add_argument("--foxglove-host", default="127.0.0.1", metavar="HOST",
                      help="address the Foxglove server binds (default 127.0.0.1: the protocol "
                           "has no authentication; tunnel over SSH, or 0.0.0.0 on a trusted "
                           "network only)")
    live.add_argument("--foxglove-max-hz", type=float, default=50.0, metavar="HZ",
                      help="most messages per second per Foxglove channel (0 = all; default 50)")


def _graph_flags(p: argparse.ArgumentParser) -> None:
    """The node graph: how long it runs, its parameters and the edit node's timing."""
    g = p.add_argument_group("node graph")
    g.add_argument("--duration", type=float, default=10.0,
                   help="seconds to run after the first command (default 10)")
    g.add_argument("--params", type=Path, default=None,
                   help="ROS 2 parameter YAML (default: edgerl_ros/config/edgerl.yaml)")
    g.add_argument("--trigger", choices=("manifest", "state", "clock"), default=None,
                   help="what makes the edit node tick. Default: the bundle's timing.trigger, "
                        "the trigger it was trained with (the params file's 'manifest'; "
                        "`edgerl inspect BUNDLE` shows it, the deploy report's graph.trigger "
                        "says which ran). state = one tick per state message (clock fallback "
                        "if states stop), clock = the node's own fixed-rate grid")
    g.add_argument("--rate-hz", type=float, default=None,
                   help="run the robot and the edit loop at this rate instead of the "
                        "manifest's control_hz (timing measurements)")
    g.add_argument("--domain-id", type=int, default=None,
                   help="ROS_DOMAIN_ID (default: random in 1..200)")
    g.add_argument("--instruction", default="", help="instruction for the planner")
    g.add_argument("--inject-bad-hz", type=float, default=0.0,
                   help="publish malformed state/chunk messages at this rate (robustness check)")
    g.add_argument("--keystore", type=Path, default=None, metavar="DIR",
                   help="SROS2 keystore from `edgerl ros-keystore`: each process runs in its "
                        "own enclave with DDS security enforced (ROS_SECURITY_STRATEGY="
                        "Enforce); refused before anything starts where this ROS 2 cannot "
                        "enforce it")
    g.add_argument("--baseline-rtt", type=float, default=0.0, metavar="S",
                   help="first measure a bare rclpy round trip between two processes for S "
                        "seconds at the control rate and --rt-priority, and report the "
                        "state -> command e2e p99 over it (e2e_over_bare_rtt_p99; 0 = off)")
    g.add_argument("--operator-key", type=Path, default=None, metavar="FILE",
                   help="operator key (`edgerl operator keygen`) that signs e-stop re-arms "
                        "and overrides (default: EDGERL_OPERATOR_KEY; none: they are all "
                        "refused)")
    g.add_argument("--compose", action="store_true",
                   help="--robot sim|serial: run the robot node and the edit node in one "
                        "process (edgerl_ros.container): states and commands pass by call "
                        "instead of crossing the middleware; topics are still published")


def _live_config(args: argparse.Namespace) -> Any:
    """The ``--foxglove*`` flags as an ``edgerl_ros.foxglove_live.LiveConfig`` (``None`` when
    off); a bad port or a missing foxglove-sdk is refused here, before anything starts."""
    if args.foxglove == 0:
        return None
    from edgerl_ros.foxglove_live import LiveConfig, LiveViewError, require_foxglove

    if not 1 <= args.foxglove <= 65535:
        raise CliError(f"--foxglove must be a port in 1..65535 (0 = off), got {args.foxglove}")
    try:
        require_foxglove()
        return LiveConfig(port=args.foxglove, host=args.foxglove_host,
                          max_rate_hz=args.foxglove_max_hz)
    except LiveViewError as exc:
        raise CliError(f"--foxglove: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_result

    try:
        from edgerl_ros.graph import (
            COMPOSABLE_ROBOTS,
            DEFAULT_CONFIG,
            DeployConfig,
            DeployError,
            deploy,
        )
    except ImportError as exc:
        raise CliError(f"ROS 2 support is not installed ({exc}); install edgerl[ros] and "
                       "ros2_ws/src/edgerl_ros (make venv)") from exc
    if not args.duration > 0:
        raise CliError(f"--duration must be > 0, got {args.duration}")
    if args.domain_id is not None and not 0 <= args.domain_id <= 232:
        raise CliError(f"--domain-id must be in 0..232, got {args.domain_id}")
    if args.inject_bad_hz < 0:
        raise CliError("--inject-bad-hz must be >= 0")
    if args.robot == "serial" and not args.port:
        raise CliError("--robot serial needs --port (e.g. /dev/ttyACM0)")
    if not 0 <= args.rt_priority <= 99:
        raise CliError(f"--rt-priority must be in 0..99, got {args.rt_priority}")
    if args.min_success is not None and not 0.0 <= args.min_success <= 1.0:
        raise CliError(f"--min-success must be in 0..1, got {args.min_success}")
    if args.compose and args.robot not in COMPOSABLE_ROBOTS:
        raise CliError(f"--compose runs the edit node inside the robot's process: it supports "
                       f"--robot {' or '.join(COMPOSABLE_ROBOTS)}, not {args.robot}")
    if not 1200 <= args.baud <= 20_000_000:
        raise CliError(f"--baud must be in 1200..20000000, got {args.baud}")
    if args.keystore is not None and args.inject_bad_hz > 0:
        raise CliError("--inject-bad-hz publishes state and chunks from the monitor, which "
                       "its enclave does not allow: leave out --keystore for that check")
    record = args.record
    params = args.params or DEFAULT_CONFIG
    tmp = None
    if args.trigger is not None or args.rate_hz is not None or args.loop_cpus is not None:
        tmp = tempfile.TemporaryDirectory(prefix="edgerl_deploy_")
        params = override_params(Path(params), Path(tmp.name), args.trigger, args.rate_hz,
                                 args.loop_cpus)
    if args.write_latency_model is not None and record is None:
        record = args.write_latency_model.with_suffix(".mcap")
    cfg = DeployConfig(bundle=args.bundle, robot=args.robot, port=args.port, baud=args.baud,
                       device=args.device, duration_s=args.duration,
                       params_file=params, record=record,
                       record_transitions=args.record_transitions,
                       domain_id=args.domain_id, instruction=args.instruction,
                       inject_bad_hz=args.inject_bad_hz, log_dir=args.log_dir,
                       rt_priority=args.rt_priority, min_success=args.min_success,
                       compose=args.compose, keystore=args.keystore,
                       operator_key=args.operator_key, baseline_rtt_s=args.baseline_rtt,
                       foxglove=_live_config(args))
    bar = _Bar(args.duration)
    # SIGTERM (e.g. `timeout`, a supervisor) unwinds like Ctrl-C so the node processes are
    # stopped by deploy()'s cleanup instead of being orphaned
    old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        result = deploy(cfg, on_progress=bar.update)
    except DeployError as exc:
        raise CliError(str(exc)) from exc
    finally:
        signal.signal(signal.SIGTERM, old_term)
        bar.close()
        if tmp is not None:
            tmp.cleanup()
    if args.write_latency_model is not None:
        result["latency_model"] = _recorded_latency_model(args.bundle, record,
                                                          args.write_latency_model)
    print_result(result, as_json=args.json, title="edgerl deploy",
                 rows=[{k: result.get(k) for k in SUMMARY_KEYS}])
    if not args.json:
        if record:
            print(f"recorded {record}")
        if args.record_transitions:
            print(f"recorded transitions {args.record_transitions}")
        if args.write_latency_model is not None:
            print(f"wrote latency model {args.write_latency_model}")
    return 0 if result["success"] else 2


def override_params(params: Path, out_dir: Path, trigger: str | None,
                    rate_hz: float | None, loop_cpus: str | None = None) -> Path:
    """A copy of the parameter file ``params`` with the edit node's trigger, the robot's and
    loop's rate and the loop thread's CPUs set; returns its path (in ``out_dir``)."""
    import yaml

    from edgerl.runtime.cpu_affinity import cpu_list

    try:
        doc = yaml.safe_load(params.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise CliError(f"--params {params}: {exc}") from exc
    edit = doc.setdefault("edit_policy_node", {}).setdefault("ros__parameters", {})
    if trigger is not None:
        edit["trigger"] = trigger
    if rate_hz is not None:
        if not rate_hz > 0:
            raise CliError(f"--rate-hz must be > 0, got {rate_hz}")
        edit["rate_hz"] = float(rate_hz)
        robot = doc.setdefault("sim_robot_node", {}).setdefault("ros__parameters", {})
        robot["rate_hz"] = float(rate_hz)
    if loop_cpus is not None:
        try:
            cpus = cpu_list(loop_cpus, "--loop-cpus")
        except ValueError as exc:
            raise CliError(str(exc)) from exc
        edit["loop_cpus"] = ",".join(map(str, cpus))
    path = out_dir / "deploy_params.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _recorded_latency_model(bundle: Path, recording: Path, out: Path) -> dict:
    """Measure chunk stamp -> arrival in ``recording`` at the bundle's control rate and write
    the latency model file ``out``; returns its summary."""
    from edgerl_ros.recording import read_recording

    from edgerl.apps.cli.latency_model import write_latency_model
    from edgerl.runtime.planners.latency_record import chunk_latencies_from_recording

    try:
        latencies_s = chunk_latencies_from_recording(read_recording(recording))
    except ValueError as exc:
        raise CliError(f"--write-latency-model: {exc}") from exc
    return write_latency_model(bundle, latencies_s, "deploy", out)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


class _Bar:
    """tqdm bar over the run's seconds on a terminal; nothing otherwise."""

    def __init__(self, seconds: float) -> None:
        import sys

        self._bar = None
        if sys.stderr.isatty():
            from tqdm.auto import tqdm

            self._bar = tqdm(total=round(seconds, 1), desc="deploy", unit="s")
        self._seconds = seconds

    def update(self, frac: float) -> None:
        if self._bar is not None:
            self._bar.n = round(frac * self._seconds, 1)
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
