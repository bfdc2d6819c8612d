"""What every edgerl node shares: topic names, QoS profiles, validated parameters,
diagnostics messages and the process ``main``.

QoS choices (see docs/ros2.md):

* state (``JointState``) and commands: BEST_EFFORT, KEEP_LAST 1, VOLATILE. Both are
  periodic and superseded one period later; a reliable retransmit would deliver an old
  setpoint late (and block the writer's history), which is worse than a drop. Loss shows up
  as a rate deficit on ``/diagnostics`` and the robot side holds or stops on its watchdog.
* chunks (``JointTrajectory``): RELIABLE, KEEP_LAST 1. They are rare (planner period) and
  each one matters: losing one leaves the loop on a stale chunk for a whole period. Depth 1
  keeps only the newest, so a slow reader never receives an old chunk after a new one.
* instruction (``String``): RELIABLE + TRANSIENT_LOCAL depth 1, so a planner that starts
  late still gets the current instruction.
* episode (``std_msgs/Header``, sim robots only): RELIABLE + TRANSIENT_LOCAL depth 1. A
  reset is a rare event that must not be lost, and only the newest boundary matters.
* ``/diagnostics``: RELIABLE depth 10 (what diagnostic_aggregator and rqt expect).
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

__all__ = [
    "CHUNK_QOS",
    "COMMAND_QOS",
    "DIAG_QOS",
    "INTERVENTION_QOS",
    "EPISODE_QOS",
    "INSTRUCTION_QOS",
    "PROCESS_RT",
    "RT_PRIORITY_ENV",
    "STATE_QOS",
    "TOPICS",
    "DEVICE_PARAMS",
    "ParamSpec",
    "RealtimeThreads",
    "declare_validated",
    "diag_status",
    "process_realtime",
    "refuse_unless_live",
    "replace_timer",
    "run_node",
    "trt_options",
]

log = logging.getLogger(__name__)

#: Default topic names (relative, so a namespace or remapping moves the whole graph).
TOPICS = {
    "state": "robot/joint_states",
    "command": "robot/command",
    "chunk": "planner/chunk",
    "instruction": "planner/instruction",
    "expert": "sim/expert_chunk",
    "episode": "robot/episode",
    "estop_reset": "robot/estop_reset",
    "intervention": "operator/intervention",
    "diagnostics": "/diagnostics",
}

STATE_QOS = QoSProfile(reliability=ReliabilityPolicy.BEST_EFFORT,
                       history=HistoryPolicy.KEEP_LAST, depth=1,
                       durability=DurabilityPolicy.VOLATILE)
COMMAND_QOS = STATE_QOS
CHUNK_QOS = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                       depth=1, durability=DurabilityPolicy.VOLATILE)
INSTRUCTION_QOS = QoSProfile(reliability=ReliabilityPolicy.RELIABLE,
                             history=HistoryPolicy.KEEP_LAST, depth=1,
                             durability=DurabilityPolicy.TRANSIENT_LOCAL)
EPISODE_QOS = INSTRUCTION_QOS
#: Operator interventions (``edgerl.contract.intervention``): none may be lost or merged.
INTERVENTION_QOS = QoSProfile(reliability=ReliabilityPolicy.RELIABLE,
                              history=HistoryPolicy.KEEP_LAST, depth=10,
                              durability=DurabilityPolicy.VOLATILE)
DIAG_QOS = QoSProfile(reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST,
                      depth=10)


@dataclass(frozen=True)
class ParamSpec:
    """One node parameter: default (its type is the parameter's type), description, and a
    validator returning an error text (or ``None`` when the value is fine).

    ``low``/``high`` become the descriptor's range (shown by ``ros2 param describe``).
    """

    name: str
    default: Any
    description: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    read_only: bool = False

    def descriptor(self) -> ParameterDescriptor:
        d = ParameterDescriptor(name=self.name, description=self.description,
                                read_only=self.read_only)
        if self.choices:
            d.additional_constraints = "one of: " + ", ".join(self.choices)
        if self.low is not None and self.high is not None:
            if isinstance(self.default, bool):
                pass
            elif isinstance(self.default, int):
                d.integer_range = [IntegerRange(from_value=int(self.low),
                                                to_value=int(self.high), step=0)]
            elif isinstance(self.default, float):
                d.floating_point_range = [FloatingPointRange(from_value=float(self.low),
                                                             to_value=float(self.high), step=0.0)]
        return d

    def check(self, value: Any) -> str | None:
        """Why ``value`` is not acceptable, or ``None``."""
        want = type(self.default)
        if want is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, want) or (want is not bool and isinstance(value, bool)):
            return f"{self.name}: expected {want.__name__}, got {type(value).__name__}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"{self.name}: must be finite, got {value}"
        if self.low is not None and value < self.low:
            return f"{self.name}: {value} is below the minimum {self.low}"
        if self.high is not None and value > self.high:
            return f"{self.name}: {value} is above the maximum {self.high}"
        if self.choices and value not in self.choices:
            return f"{self.name}: {value!r} is not one of {', '.join(self.choices)}"
        return None


#: onnxruntime device parameters of the nodes that run networks (edit policy, planner).
DEVICE_PARAMS = [
    ParamSpec("device", "auto", "onnxruntime device: auto = TensorRT EP, else CUDA EP, else CPU",
              choices=("auto", "cpu", "cuda", "tensorrt"), read_only=True),
    ParamSpec("trt_cache_dir", "", "TensorRT engine cache directory ('' = ~/.cache/edgerl/"
              "tensorrt, 'off' = rebuild the engine at every start)", read_only=True),
    ParamSpec("trt_fp16", False, "let TensorRT use fp16 kernels", read_only=True),
    ParamSpec("trt_workspace_mb", 1024, "TensorRT builder workspace (MiB)", 1, 65536,
              read_only=True),
]


def trt_options(params: dict[str, Any]) -> Any:
    """:class:`edgerl.runtime.inference.TensorRTOptions` from the :data:`DEVICE_PARAMS`."""
    from edgerl.runtime.inference import TensorRTOptions

    cache = params["trt_cache_dir"]
    return TensorRTOptions(cache_dir=None if cache == "" else ("" if cache == "off" else cache),
                           fp16=bool(params["trt_fp16"]),
                           workspace_mb=int(params["trt_workspace_mb"]))


def declare_validated(node: Any, specs: list[ParamSpec],
                      extra_check: Callable[[dict[str, Any]], str | None] | None = None
                      ) -> dict[str, Any]:
    """Declare ``specs`` on ``node`` with descriptors; every later set (``ros2 param set``,
    YAML, overrides) passes through the validators and is rejected with a reason.

    ``extra_check(changed)`` runs once every parameter is declared, for each accepted set:
    it applies the values that can change at run time and returns a reason (the set is then
    refused and nothing changes) for the rest -- a node never reports success for a value it
    does not use (see :func:`refuse_unless_live`).

    Returns the declared values by name. Raises ``rclpy`` ``InvalidParameterValueException``
    when a start-up override is invalid.
    """
    by_name = {s.name: s for s in specs}
    ready = [False]  # start-up values are read by the node itself after declaration

    def on_set(params: list[Any]) -> SetParametersResult:
        for p in params:
            spec = by_name.get(p.name)
            if spec is None:
                continue
            reason = spec.check(p.value)
            if reason is not None:
                return SetParametersResult(successful=False, reason=reason)
        if extra_check is not None and ready[0]:
            reason = extra_check({p.name: p.value for p in params})
            if reason is not None:
                return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    node.add_on_set_parameters_callback(on_set)
    for spec in specs:
        node.declare_parameter(spec.name, spec.default, spec.descriptor())
    ready[0] = True
    return {s.name: node.get_parameter(s.name).value for s in specs}


def refuse_unless_live(changed: dict[str, Any], live: set[str] | frozenset[str],
                       why: str = "read at start-up only; restart the node to change it"
                       ) -> str | None:
    """The refusal reason when ``changed`` names a parameter outside ``live`` (``None`` when
    every one can be applied now)."""
    hit = sorted(set(changed) - set(live))
    return f"{', '.join(hit)}: {why}" if hit else None


def replace_timer(node: Any, timer: Any, period_s: float, callback: Callable[[], None]) -> Any:
    """A new ``period_s`` timer for ``callback`` in place of ``timer`` (destroyed): rclpy
    timers cannot change period in place."""
    if timer is not None:
        node.destroy_timer(timer)
    return node.create_timer(float(period_s), callback)


class RealtimeThreads:
    """Threads started inside this block run with SCHED_FIFO ``priority`` (1..99; 0 = leave
    the scheduling alone); the calling thread gets its old policy back on exit.

    Linux threads inherit the creator's policy, so ``with RealtimeThreads(50):
    loop.start()`` gives the loop thread real-time priority without touching its code.
    ``error`` holds the reason when the priority could not be set (no CAP_SYS_NICE /
    rtprio limit); the caller logs it and runs without.
    """

    def __init__(self, priority: int) -> None:
        self.priority = int(priority)
        self.error: str | None = None
        self.applied = False
        self._old: tuple[int, Any] | None = None

    def __enter__(self) -> RealtimeThreads:
        if self.priority <= 0:
            return self
        try:
            self._old = (os.sched_getscheduler(0), os.sched_getparam(0))
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.priority))
            self.applied = True
        except (OSError, AttributeError) as exc:
            self.error = f"SCHED_FIFO {self.priority} not permitted ({exc})"
        return self

    def __exit__(self, *exc: object) -> None:
        if self.applied and self._old is not None:
            os.sched_setscheduler(0, *self._old)


def diag_status(name: str, hardware_id: str, values: dict[str, Any], level: int = 0,
                message: str = "ok") -> DiagnosticStatus:
    """A DiagnosticStatus with ``values`` as key/value strings (floats with 6 significant
    digits; NaN as ``nan``)."""
    st = DiagnosticStatus(level=bytes([level]), name=name, message=message,
                          hardware_id=hardware_id)
    for key, value in values.items():
        text = f"{value:.6g}" if isinstance(value, float) else str(value)
        st.values.append(KeyValue(key=key, value=text))
    return st


def diag_array(node: Any, statuses: list[DiagnosticStatus]) -> DiagnosticArray:
    msg = DiagnosticArray()
    msg.header.stamp = node.get_clock().now().to_msg()
    msg.status = statuses
    return msg


#: Environment variable: SCHED_FIFO priority for a whole node process (``edgerl deploy
#: --rt-priority``); applied before ``rclpy.init`` so the middleware's threads inherit it.
RT_PRIORITY_ENV = "EDGERL_RT_PRIORITY"
#: What :func:`process_realtime` did in this process (``None``: not asked).
PROCESS_RT: dict[str, Any] = {"priority": 0, "applied": False, "error": None}


def process_realtime(env: dict[str, str] | None = None) -> dict[str, Any]:
    """Give the calling thread, and so every thread it starts later (executor, DDS
    listeners, loop threads), SCHED_FIFO at the priority in ``$EDGERL_RT_PRIORITY``.

    Returns (and stores in :data:`PROCESS_RT`) ``{"priority", "applied", "error"}``; an
    invalid value or a refused priority is reported there and logged, never raised (the
    node then runs with normal scheduling).
    """
    text = (os.environ if env is None else env).get(RT_PRIORITY_ENV, "").strip()
    out: dict[str, Any] = {"priority": 0, "applied": False, "error": None}
    if text:
        try:
            prio = int(text)
            if not 0 <= prio <= 99:
                raise ValueError("must be 0..99")
        except ValueError as exc:
            out["error"] = f"{RT_PRIORITY_ENV}={text!r}: {exc}"
        else:
            out["priority"] = prio
            if prio:
                try:
                    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
                    out["applied"] = True
                except (OSError, AttributeError) as exc:
                    out["error"] = f"SCHED_FIFO {prio} not permitted ({exc})"
    if out["error"]:
        log.warning("%s; the node runs with normal scheduling", out["error"])
    PROCESS_RT.update(out)
    return out


def declare_with_bundle(node: Any, specs: list[ParamSpec],
                        on_change: Callable[[dict[str, Any]], str | None] | None,
                        required: tuple[str, ...] = ("bundle",)) -> tuple[dict[str, Any], Any]:
    """:func:`declare_validated`, then check that the ``required`` string parameters are set
    and load the bundle through the one gate (:func:`~edgerl.runtime.bundle_check.
    verify_bundle`: closed file set, signature when a key is configured, bounds). Returns
    ``(params, PolicySpec)``.

    Raises:
        ValueError: a required parameter is empty (named, with the node's name).
        BundleError: the manifest is missing or invalid.
    """
    from edgerl.runtime.bundle_check import verify_bundle

    p = declare_validated(node, specs, on_change)
    missing = [name for name in required if not p[name]]
    if missing:
        names = " and ".join(f"'{n}'" for n in missing)
        raise ValueError(f"{node.get_name()}: parameter{'s' if len(missing) > 1 else ''} "
                         f"{names} {'are' if len(missing) > 1 else 'is'} required")
    return p, verify_bundle(p["bundle"])  # the one gate every loader goes through


def run_node(factory: Callable[[], Any], args: list[str] | None = None,
             after_create: Callable[[Any], None] | None = None) -> int:
    """Process main: ``rclpy.init``, build the node, spin until SIGINT/SIGTERM, clean up.

    The node may define ``shutdown()`` (stop threads) which runs before ``destroy_node``;
    a composition (``edgerl_ros.container``) lists its nodes in ``nodes``.
    Returns the exit status (0 on a clean stop, 1 when the node failed to start).
    """
    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from edgerl.contract.logs import setup_logging

    setup_logging(os.environ.get("EDGERL_LOG_LEVEL", "INFO"))
    # Our own SIGINT/SIGTERM handling: stop the node's threads first, then shut rclpy down
    # (rclpy's handler would invalidate the context under a publishing thread).
    process_realtime()  # before rclpy.init: the middleware's threads inherit it
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    node = None
    status = 0
    try:
        node = factory()
        if after_create is not None:
            after_create(node)
        # Single-threaded on purpose: every callback here is a short handoff (latest-value
        # slots, counters); the fast loops run in their own threads. rclpy's
        # MultiThreadedExecutor re-polls its wait set while a callback is queued, and that
        # busy loop held the GIL so long that the sim robot stepped at 18-44 Hz instead of
        # 50 Hz with e2e p99 of 265-620 ms on an idle machine (now 50 Hz, p99 6.4 ms).
        executor = SingleThreadedExecutor()
        for each in getattr(node, "nodes", [node]):  # a composition: several in one process
            executor.add_node(each)
        while rclpy.ok() and not stop.is_set() and not getattr(node, "failed", False):
            executor.spin_once(timeout_sec=0.1)
        status = 1 if getattr(node, "failed", False) else 0
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        log.exception("node failed")
        status = 1
    finally:
        if node is not None:
            shutdown = getattr(node, "shutdown", None)
            if shutdown is not None:
                try:
                    shutdown()
                except Exception:
                    log.exception("node shutdown failed")
            node.destroy_node()
        rclpy.try_shutdown()
    return status
