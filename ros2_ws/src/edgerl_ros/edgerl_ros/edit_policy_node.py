"""``edit_policy_node``: the fast edit loop as a ROS 2 lifecycle node.

A thin shell over :class:`edgerl.runtime.edit_loop.EditLoop`:

* ``on_configure``: load the bundle (hash-checked), build ChunkBuffer + EditLoop, create the
  command publisher, ``/diagnostics`` publisher, state and chunk subscriptions, diagnostics
  timer. A bad bundle fails the transition (the node stays unconfigured) with a logged reason.
* ``on_activate``: activate the publisher and start the loop thread (the runtime's scheduler;
  no rclpy timer drives the fast loop). ``on_deactivate``: stop the thread.
* ``on_cleanup``: destroy every publisher, subscription and timer it created, free the loop.

Inputs (latest-value handoff): ``robot/joint_states`` (``JointState``; ``name`` must be the
manifest's observation names in any order, values in ``position``) is written into the loop's
:class:`ObservationSlot`; ``planner/chunk`` (``JointTrajectory``, stamp = planner observation
time, strictly increasing ``time_from_start``, names = action names) is pushed into the
:class:`ChunkBuffer`. Malformed messages, and states/chunks outside the manifest's bounds
(:class:`~edgerl.runtime.input_guard.InputGuard`), are dropped, counted by reason and reported.
Default ``stale_policy: escalate``: hold, decay, e-stop (:mod:`edgerl.runtime.escalation`).
Configured, only ``command_field`` and ``diagnostics_period_s`` change (others: refused).

Episode resets (optional; sim robots): a ``std_msgs/Header`` on ``robot/episode`` whose
stamp is the new episode's first state stamp clears the ChunkBuffer, resets the loop's
history (committed actions, recurrent state, rate-limit reference; :meth:`EditLoop.reset` at
the next tick) and from then on drops chunks whose observation stamp predates it (counted as
``chunks_dropped_pre_reset``), as the training wrappers do at reset. Without reset messages
(real robots) nothing changes.

Output: ``robot/command`` as ``sensor_msgs/JointState`` -- named per element (the receiver
checks names, no positional guessing), one message per tick, ``header.stamp`` = the stamp of
the state the command was computed from (so anyone downstream measures state -> command
latency and can reject commands computed from old states); the value goes in the field
named by ``command_field`` (``effort`` for torques, ``position``/``velocity`` for targets).
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

import numpy as np
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from trajectory_msgs.msg import JointTrajectory

from edgerl.runtime.edit_loop import EditLoop, LoopConfig, ObservationSlot
from edgerl.runtime.input_guard import InputGuard
from edgerl.runtime.state_trigger import InlineStateTrigger
from edgerl_ros.common import (
    CHUNK_QOS,
    COMMAND_QOS,
    DEVICE_PARAMS,
    EPISODE_QOS,
    INTERVENTION_QOS,
    PROCESS_RT,
    STATE_QOS,
    TOPICS,
    ParamSpec,
    RealtimeThreads,
    declare_validated,
    run_node,
    trt_options,
)
from edgerl_ros.edit_diagnostics import EditNodeDiagnostics
from edgerl_ros.edit_io import EditNodeIO
from edgerl_ros.edit_transitions import TransitionRecording, drain_period_s
from edgerl_ros.messages import (
    COMMAND_FIELDS,
    StampMemo,
    TimeBase,
)
from edgerl_ros.node_diagnostics import NodeDiagnostics
from edgerl_ros.operator import OPERATOR_PARAMS, OperatorGate
from edgerl_ros.stats import DropCounter, Samples

__all__ = ["PARAMS", "EditPolicyNode", "StampedObservationSlot", "main"]

log = logging.getLogger(__name__)

PARAMS = [
    ParamSpec("bundle", "", "bundle directory (manifest.json + policy.onnx)"),
    ParamSpec("rate_hz", 0.0, "loop rate in Hz; 0 = the manifest's control_hz", 0.0, 10000.0),
    ParamSpec("command_field", "effort", "JointState field the command is written to",
              choices=COMMAND_FIELDS),
    ParamSpec("merge", "manifest", "how a new chunk merges with the current one (manifest: "
              "the bundle's timing.merge, as trained)",
              choices=("manifest", "replace", "blend", "average")),
    ParamSpec("trigger", "manifest", "what makes the loop tick: state (each state message, "
              "clock fallback after timing.trigger_timeout_periods), clock (own fixed-rate "
              "grid) or manifest (the bundle's timing.trigger, as trained)",
              choices=("manifest", "state", "clock")),
    ParamSpec("stale_policy", "escalate", "command when no chunk / stale chunk (escalate: hold, "
              "decay to the safe action, e-stop, with the manifest's timing.hold_s/decay_s; "
              "policy: run the edit policy on zero rows, as in training)",
              choices=("escalate", "hold", "decelerate", "zero", "policy")),
    ParamSpec("backend", "onnx", "inference backend", choices=("onnx", "numpy")),
    ParamSpec("spin_s", 300e-6, "busy-wait before each deadline (s)", 0.0, 0.01),
    ParamSpec("rt_priority", 0, "SCHED_FIFO priority of the loop thread, or with inline state "
              "ticks of the thread that delivers the states (0 = normal)", 0, 99),
    ParamSpec("loop_cpus", "", "CPUs the loop thread is pinned to, e.g. '3' or '2-3' ('' = not "
              "pinned; keep the planner and other nodes off them, isolcpus on a robot). "
              "With trigger state and inline_tick: the thread that delivers the states",
              read_only=True),
    ParamSpec("inline_tick", True, "with trigger state: tick inside the state callback (no "
              "loop thread, no hand-off; clock fallback from a timer). False: the loop "
              "thread waits for each state"),
    ParamSpec("await_state_s", 0.0, "with inline state ticks: after warming the caches just "
              "before the next expected state, poll the state subscription for up to this "
              "long (s) instead of sleeping, so the state is ticked on a warm CPU (0 = off; "
              "costs that much CPU per period)", 0.0, 0.01, read_only=True),
    ParamSpec("diagnostics_period_s", 1.0, "how often /diagnostics is published", 0.05, 60.0),
    ParamSpec("state_source", "topic", "where states and episode resets come from: topic "
              "(robot/joint_states, robot/episode) or in_process (a robot node composed in "
              "this process calls accept_state/accept_episode; edgerl_ros.container)",
              choices=("topic", "in_process"), read_only=True),
    ParamSpec("transitions_file", "", "record the loop's transitions and the accepted "
              "operator interventions to this JSON-MCAP for `edgerl finetune --interventions` "
              "('' = off; edgerl_ros.edit_transitions)", read_only=True),
    ParamSpec("autostart", False, "configure and activate at start-up (no lifecycle manager)",
              read_only=True),
    *OPERATOR_PARAMS,
    *DEVICE_PARAMS,
]


class StampedObservationSlot(ObservationSlot):
    """:class:`ObservationSlot` that remembers the time of the observation the loop last read,
    and the exact ROS stamp (ns) it came with, so the command sent in the same tick carries
    the state's stamp bit-for-bit."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.read_t = float("nan")
        self._stamps = StampMemo(keep=16)

    def write_stamped(self, obs: np.ndarray, t: float, stamp_ns: int) -> None:
        """Store ``obs`` taken at monotonic ``t`` whose message stamp was ``stamp_ns``."""
        self._stamps.remember(t, stamp_ns)
        self.write(obs, t)

    def read_into(self, out: np.ndarray) -> tuple[float, int]:
        t, seq = super().read_into(out)
        self.read_t = t
        return t, seq

    def read_stamp_ns(self) -> int:
        """ROS stamp of the observation last read (0 if unknown)."""
        return self._stamps.get(self.read_t) or 0


class EditPolicyNode(EditNodeIO, EditNodeDiagnostics, LifecycleNode):
    """See the module docstring. Inputs and output: :class:`~edgerl_ros.edit_io.EditNodeIO`;
    diagnostics: :class:`~edgerl_ros.edit_diagnostics.EditNodeDiagnostics`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("edit_policy_node", **kwargs)
        self.loop: EditLoop | None = None
        self.params = declare_validated(self, PARAMS, self._check_live)
        self.timebase = TimeBase()
        self.drops = DropCounter()
        self.spec = self.guard = None  # the configured bundle's manifest and InputGuard
        self._slot: StampedObservationSlot | None = None
        self._cmd_pub = None
        self._subs: list[Any] = []
        self._state_sub: Any = None  # robot/joint_states (state_source topic)
        self.states_awaited = 0  # states taken by the await_state_s poll
        self._diagnostics: NodeDiagnostics | None = None
        self._inline: InlineStateTrigger | None = None
        self._fallback_timer = None
        self._prewarm_timer = None
        self._reset_timers_per_state = True
        self.commands_sent = 0
        self.states_received = 0  # valid states written to the slot
        self.reset_stamp_ns = 0  # newest announced episode start (0: none)
        self.episode_resets = 0
        self.estop_resets = 0  # operator re-arms applied
        self.interventions_applied = 0  # operator/intervention records pushed to the loop
        self.operator: OperatorGate | None = None  # checks re-arms and interventions
        self.chunks_dropped_pre_reset = 0
        self.rt_applied = False
        self._rt_threads: set[int] = set()  # threads given rt_priority / loop_cpus (inline)
        self.inline_cpus: tuple[int, ...] = ()
        self.state_age = Samples()
        #: Composed robot: ``command_link(command (A,), state stamp ns)`` gets each command
        #: before it is published (set by :class:`~edgerl_ros.composition.ComposedLink`).
        self.command_link: Any = None
        self._pending: tuple[np.ndarray, int] | None = None  # composed: command to publish
        #: ``transitions_file`` set: the loop's transitions go to this recording
        self.transitions: TransitionRecording | None = None
        self._drain_timer = None

    def _check_live(self, changed: dict[str, Any]) -> str | None:
        """Unconfigured: all used at the next configure; configured: see the module doc."""
        if self.loop is None:
            return None
        hit = sorted(set(changed) - {"command_field", "diagnostics_period_s"})
        if hit:
            return f"{', '.join(hit)}: cannot change while configured; clean up first"
        if "command_field" in changed:
            self.command_field = changed["command_field"]
        if "diagnostics_period_s" in changed and self._diagnostics is not None:
            self._diagnostics.set_period(changed["diagnostics_period_s"])
        return None

    # --- lifecycle ---------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        from edgerl.contract.spec import load_bundle_manifest
        from edgerl.runtime.cpu_affinity import cpu_list
        from edgerl.runtime.deployment import Deployment
        from edgerl.runtime.safety import SafetyConfig

        p = {s.name: self.get_parameter(s.name).value for s in PARAMS}
        if not p["bundle"]:
            self.get_logger().error("configure failed: parameter 'bundle' is empty")
            return TransitionCallbackReturn.FAILURE
        try:
            cfg = LoopConfig(rate_hz=float(p["rate_hz"]) or None, spin_s=float(p["spin_s"]),
                             cpus=cpu_list(p["loop_cpus"], "loop_cpus"),
                             safety=SafetyConfig(stale_policy=p["stale_policy"]),
                             trigger="" if p["trigger"] == "manifest" else p["trigger"])
            slot = StampedObservationSlot(load_bundle_manifest(p["bundle"]).observation.dim)
            # merge, stale rule and trigger from the manifest's timing (as trained)
            dep = Deployment.from_bundle(p["bundle"], self._send, loop_cfg=cfg, obs=slot,
                                         merge="" if p["merge"] == "manifest" else p["merge"],
                                         planner="none", backend=p["backend"],
                                         device=p["device"], trt=trt_options(p))
            spec, loop = dep.spec, dep.loop
        except Exception as exc:  # a bad bundle must not take the process down
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        if p["transitions_file"]:
            try:
                self.transitions = TransitionRecording(
                    p["transitions_file"], loop, {"bundle": str(p["bundle"]),
                                                  "source": f"ROS 2 {self.get_name()}"})
            except (OSError, ValueError) as exc:
                self.get_logger().error(f"configure failed: transitions_file: {exc}")
                return TransitionCallbackReturn.FAILURE
            self._drain_timer = self.create_timer(drain_period_s(loop.rate_hz),
                                                  self.transitions.drain)
        try:  # freshness: the InputGuard's stamp checks below
            self.operator = OperatorGate(p["operator_key_file"], p["operator_auth"],
                                         max_age_s=0.0)
        except ValueError as exc:
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        self.guard = InputGuard(spec)
        self.spec, self.loop, self._slot = spec, loop, slot
        self.command_field = p["command_field"]
        self._cmd_pub = self.create_lifecycle_publisher(JointState, TOPICS["command"],
                                                        COMMAND_QOS)
        self._subs = [
            self.create_subscription(JointTrajectory, TOPICS["chunk"], self._on_chunk,
                                     CHUNK_QOS),
            # queued like interventions: others' resets must not evict the operator's
            self.create_subscription(Header, TOPICS["estop_reset"], self._on_estop_reset,
                                     INTERVENTION_QOS),
            self.create_subscription(JointState, TOPICS["intervention"], self._on_intervention,
                                     INTERVENTION_QOS),
        ]
        if p["state_source"] == "topic":  # in_process: the composed robot calls accept_*
            self._state_sub = self.create_subscription(JointState, TOPICS["state"],
                                                       self._on_state, STATE_QOS)
            self._subs += [
                self._state_sub,
                self.create_subscription(Header, TOPICS["episode"], self._on_episode,
                                         EPISODE_QOS)]
        self._diagnostics = NodeDiagnostics(self, "edgerl: edit_policy_node",
                                            p["diagnostics_period_s"], self._report)
        self.get_logger().info(f"configured: {spec.task}/{spec.method} at {loop.rate_hz:g} Hz")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        result = super().on_activate(state)  # activates the lifecycle publisher
        assert self.loop is not None
        self.loop.reset()
        if self.loop.trigger == "state" and self.get_parameter("inline_tick").value:
            self._activate_inline()
            return result
        with RealtimeThreads(self.get_parameter("rt_priority").value) as rt:
            self.loop.start()
        self.rt_applied = rt.applied
        if rt.error:
            self.get_logger().warning(f"{rt.error}; the loop runs at normal priority")
        self.get_logger().info("activated: edit loop running"
                               + (f" (SCHED_FIFO {rt.priority})" if rt.applied else ""))
        return result

    def _activate_inline(self) -> None:
        """State trigger without a loop thread: each state message ticks the loop in its
        own callback and restarts a one-timeout timer, which provides the clock fallback."""
        loop = self.loop
        assert loop is not None
        if loop.cfg.gc_freeze:
            gc.collect()
            gc.freeze()
        self._inline = InlineStateTrigger(loop)
        self._rt_threads.clear()  # the first state in each thread applies rt_priority / CPUs
        if self.get_parameter("state_source").value == "in_process":
            # states tick in the robot's thread: any rclpy timer here (reset per state, or
            # a periodic check) wakes rclpy's Python executor, ~1 ms of GIL per wake taken
            # from the robot's thread; the fallback runs in a sleeping thread of its own
            self._inline.start_fallback(on_tick=self._flush_publish)
            self._reset_timers_per_state = False
        else:
            # fires only after trigger_timeout_s of silence: each state restarts it
            self._fallback_timer = self.create_timer(loop.trigger_timeout_s, self._on_silence)
            self._reset_timers_per_state = True
            due = self._inline.prewarm_due_in()  # just before the next expected state
            await_s = float(self.get_parameter("await_state_s").value)
            if due is not None and await_s > 0 and self._state_sub is not None:
                due = max(due - await_s / 2, loop.period / 2)  # the state lands mid-window
                self._prewarm_timer = self.create_timer(due, self._prewarm_and_await)
            elif due is not None:
                self._prewarm_timer = self.create_timer(due, self._inline.prewarm)
        self.rt_applied = bool(PROCESS_RT["applied"])
        self.get_logger().info("activated: ticking on each state in its callback"
                               + (f" (process SCHED_FIFO {PROCESS_RT['priority']})"
                                  if self.rt_applied else ""))

    def _prewarm_and_await(self) -> None:
        """Prewarm timer with ``await_state_s``: warm the caches, then take the state from the
        subscription as soon as it lands (the executor's own ``take_message``), ticking on a
        CPU that did not go to sleep; the executor gets it otherwise."""
        inline, sub = self._inline, self._state_sub
        if inline is None or sub is None:
            return
        inline.prewarm()
        end = time.perf_counter() + float(self.get_parameter("await_state_s").value)
        while time.perf_counter() < end:
            try:
                with sub.handle:
                    taken = sub.handle.take_message(sub.msg_type, sub.raw)
            except Exception as exc:  # destroyed meanwhile (deactivating)
                log.debug("await_state: %s", exc)
                return
            if taken is not None:
                self.states_awaited += 1
                self._on_state(taken[0])
                return
            time.sleep(0)  # lets the process's other threads have the GIL, the CPU stays up

    def _deactivate_inline(self) -> None:
        for timer in (self._fallback_timer, self._prewarm_timer):
            if timer is not None:
                self.destroy_timer(timer)
        self._fallback_timer = self._prewarm_timer = None
        if self._inline is not None:
            self._inline.stop_fallback()
            self._inline = None
            if self.loop is not None and self.loop.cfg.gc_freeze:
                gc.unfreeze()

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_loop()
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_loop()
        self._free()
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_loop()
        self._free()
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._stop_loop()
        self._free()
        return TransitionCallbackReturn.SUCCESS

    def _stop_loop(self) -> None:
        self._deactivate_inline()
        if self.loop is not None and self.loop.running:
            try:
                self.loop.stop()
            except RuntimeError as exc:
                self.get_logger().error(f"edit loop: {exc}")

    def _free(self) -> None:
        for sub in self._subs:
            self.destroy_subscription(sub)
        self._subs = []
        if self._diagnostics is not None:
            self._diagnostics.close()
            self._diagnostics = None
        if self._cmd_pub is not None:
            self.destroy_lifecycle_publisher(self._cmd_pub)
            self._cmd_pub = None
        if self._drain_timer is not None:
            self.destroy_timer(self._drain_timer)
            self._drain_timer = None
        if self.transitions is not None:  # the loop has stopped: write the rest, finish
            self.transitions.close()
            self.transitions = None
        self.loop = None
        self._slot = None
        self.spec = None

    def shutdown(self) -> None:
        """Process exit: stop the loop and free everything whatever the state."""
        self._stop_loop()
        self._free()

def _autostart(node: EditPolicyNode) -> None:
    if node.get_parameter("autostart").value:
        if node.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            node.failed = True
            return
        node.trigger_activate()


def main(args: list[str] | None = None) -> int:
    return run_node(EditPolicyNode, args, after_create=_autostart)


if __name__ == "__main__":
    raise SystemExit(main())
