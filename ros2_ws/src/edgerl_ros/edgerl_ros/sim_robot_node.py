"""``sim_robot_node``: an edgerl simulation task (one env) as a ROS 2 robot.

Publishes the robot observation as ``sensor_msgs/JointState`` (``name`` = the task's
observation names, values in ``position``) at the task's control rate, stepping in real time
in its own thread; applies the newest command (``JointState`` with the action names; the
field named by ``command_field``), zero after ``command_timeout_s`` without one (the
robot's watchdog). With ``wait_for_command`` the sim does not step before the first command
(like a robot idling until commanded; state is still published). Sim only: it also publishes
the task's privileged scripted expert as a ``JointTrajectory`` chunk on ``sim/expert_chunk``
(stamp = the state's stamp; ``expert_horizon`` rows from the task's ``expert_chunk`` when it
has one, else its ``expert_action`` held), which ``planner_node`` in ``expert`` mode serves.

Episode resets are announced on ``robot/episode`` (``std_msgs/Header``; RELIABLE,
TRANSIENT_LOCAL depth 1; ``announce_resets``): ``stamp`` = the stamp of the new episode's first
state (everything stamped earlier belongs to the previous episode), ``frame_id`` = the episode
index (decimal). The edit and planner nodes then drop what they hold from the old episode.

Commands are checked before they are applied (:class:`edgerl.runtime.input_guard.InputGuard`):
one stamped more than ``command_max_age_s`` ago (computed from an old state), zero-stamped,
stamped ahead of this clock, non-finite or outside the task's action limits is refused and
counted on ``/diagnostics`` (``dropped robot/command <reason>``); the watchdog then zeroes
the action as if no command had come.

Parameters ``rate_hz``, ``command_timeout_s``, ``command_max_age_s``, ``command_field``,
``publish_expert``, ``expert_horizon``, ``expert_every``, ``wait_for_command`` and
``diagnostics_period_s`` apply at run time; the others are refused with a reason.

Composed with the edit node in one process (``edgerl_ros.container``, ``edgerl deploy
--compose``), a :class:`~edgerl_ros.composition.ComposedLink` set as :attr:`link` gets each
state (and each reset, first) in the stepping thread before it is published, and hands the
edit node's command straight to :meth:`accept_command`: no middleware on the fast path. The
same messages are still published, for the planner, recorders and other listeners.

End-to-end latency is measured here: a command's ``header.stamp`` carries the stamp of the
state it was computed from, so ``receive time - stamp`` is state-out -> command-in across
processes. Only the first command answering a state counts; a later one with the same or an
older stamp (the edit node's clock fallback ticking on a state it already answered, while
this node stalled, e.g. in a reset) is counted as ``commands_repeat_state`` instead.
``e2e_latency_*`` takes the receive time in this node's command callback (it includes the
wait for this Python node's executor, which shares the GIL with the stepping thread);
``e2e_wire_latency_*`` takes it from the middleware (``MessageInfo["received_timestamp"]``),
the time a robot driver reading the topic could have the command.
Diagnostics: step rate and jitter, episodes, successes, latency, dropped commands.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from trajectory_msgs.msg import JointTrajectory

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.clock import MonotonicClock
from edgerl.runtime.input_guard import GuardBounds, InputGuard
from edgerl_ros.common import (
    CHUNK_QOS,
    COMMAND_QOS,
    EPISODE_QOS,
    STATE_QOS,
    TOPICS,
    ParamSpec,
    RealtimeThreads,
    declare_validated,
    refuse_unless_live,
    run_node,
)
from edgerl_ros.messages import (
    COMMAND_FIELDS,
    TimeBase,
    chunk_to_trajectory,
    make_joint_state,
    ns_to_stamp,
)
from edgerl_ros.node_diagnostics import NodeDiagnostics, Report
from edgerl_ros.operator import COMMAND_SOURCE_PARAM
from edgerl_ros.robot_commands import ComposableCommands, guard_passes
from edgerl_ros.stats import AnswerLatency, DropCounter, IntervalMeter

__all__ = ["LIVE_PARAMS", "PARAMS", "SimRobotNode", "main"]

log = logging.getLogger(__name__)

PARAMS = [
    ParamSpec("task", "cartpole", "registered edgerl.sim task to run (one env, CPU)",
              read_only=True),
    ParamSpec("rate_hz", 0.0, "stepping rate in Hz; 0 = the task's control_hz", 0.0, 10000.0),
    ParamSpec("seed", 0, "task seed", 0, 2**31 - 1),
    ParamSpec("command_field", "effort", "JointState field holding the command",
              choices=COMMAND_FIELDS),
    ParamSpec("command_timeout_s", 0.5, "zero the action after this long without a command",
              0.001, 60.0),
    ParamSpec("command_max_age_s", 0.5, "refuse a command stamped (with the state it answers) "
              "longer ago than this", 0.001, 60.0),
    ParamSpec("publish_expert", True, "publish the privileged expert chunk (sim only; "
              "computed only while something subscribes to it)"),
    ParamSpec("expert_horizon", 10, "rows of the expert chunk", 1, 10000),
    ParamSpec("expert_every", 0, "publish the expert chunk every N steps (0 = auto: edgerl "
              "deploy sets about twice per planner period; every step when run bare)", 0,
              100000),
    ParamSpec("announce_resets", True, "publish each episode reset on robot/episode"),
    ParamSpec("wait_for_command", True, "do not step the sim before the first command"),
    ParamSpec("rt_priority", 0, "SCHED_FIFO priority of the stepping thread (0 = normal)",
              0, 99),
    ParamSpec("diagnostics_period_s", 1.0, "how often /diagnostics is published", 0.05, 60.0),
    COMMAND_SOURCE_PARAM,
]
#: Parameters applied at run time (the others are refused once the node runs).
LIVE_PARAMS = frozenset({"rate_hz", "command_timeout_s", "command_max_age_s", "command_field",
                         "publish_expert", "expert_horizon", "expert_every",
                         "wait_for_command", "diagnostics_period_s"})


class SimRobotNode(ComposableCommands, Node):
    """See the module docstring. Stepping starts at construction; :meth:`shutdown` stops it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("sim_robot_node", **kwargs)
        p = declare_validated(self, PARAMS, self._apply_params)
        import torch

        from edgerl.sim.registry import make_task

        torch.set_num_threads(1)
        # the stepping thread spins before each step holding the GIL: let the executor thread
        # (command callbacks, where e2e latency is measured) take it within 200 us, not 5 ms
        sys.setswitchinterval(2e-4)
        self._torch = torch
        self.env = make_task(p["task"], num_envs=1, device="cpu")
        self.env.seed(int(p["seed"]))
        self.spec = self.env.spec
        self.rate_hz = float(p["rate_hz"]) or float(self.spec.control_hz)
        self.period_s = 1.0 / self.rate_hz  # read by the stepping thread at every step
        self.command_field = p["command_field"]
        self.command_timeout_s = float(p["command_timeout_s"])
        self.publish_expert = bool(p["publish_expert"])
        self.expert_horizon = int(p["expert_horizon"])
        self.expert_every = max(1, int(p["expert_every"]))
        self.wait_for_command = bool(p["wait_for_command"])
        self.announce_resets = bool(p["announce_resets"])
        self.timebase = TimeBase()
        self.guard = InputGuard(GuardBounds(
            state_max_age_s=float("inf"), future_skew_s=0.1,
            command_max_age_s=float(p["command_max_age_s"]), max_rows=0, chunk_dt_s=0.0,
            chunk_max_age_s=0.0, low=np.asarray(self.spec.action_low, np.float64),
            high=np.asarray(self.spec.action_high, np.float64)))
        self.obs = self.env.reset()["policy"]

        self._lock = threading.Lock()
        self._command: np.ndarray | None = None
        self._command_time = -1.0
        self.drops = DropCounter()
        self.latency = AnswerLatency()  # e2e, first answer to each state
        #: e2e to the middleware's receipt: without this node's own executor wait (the GIL
        #: it shares with the stepping thread), as a robot driver in C++ would see it
        self.wire_latency = AnswerLatency()
        self.steps = IntervalMeter(1.0 / self.rate_hz)
        self.episodes = 0
        self.successes = 0
        self.commands_received = 0
        self.watchdog_trips = 0
        self.late_steps = 0
        self.resyncs = 0
        #: In-process edit node (composed): gets states and resets before they are published.
        self.link: Any = None

        self.state_pub = self.create_publisher(JointState, TOPICS["state"], STATE_QOS)
        self.expert_pub = self.create_publisher(JointTrajectory, TOPICS["expert"], CHUNK_QOS)
        self.episode_pub = (self.create_publisher(Header, TOPICS["episode"], EPISODE_QOS)
                            if self.announce_resets else None)
        # only the edit node's commands are executed (command_source; others: 'foreign')
        self._subscribe_commands(COMMAND_QOS, p["command_source"])
        self.diagnostics = NodeDiagnostics(self, "edgerl: sim_robot_node",
                                           p["diagnostics_period_s"], self._report)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sim_robot", daemon=True)
        with RealtimeThreads(int(p["rt_priority"])) as rt:
            self._thread.start()
        if rt.error:
            self.get_logger().warning(f"{rt.error}; stepping at normal priority")
        self.get_logger().info(f"sim robot: task {p['task']} at {self.rate_hz:g} Hz")

    @property
    def commands_repeat_state(self) -> int:
        """Edit commands re-answering a state already answered (not in the e2e latency)."""
        return self.latency.repeats

    @property
    def obs_names(self) -> list[str]:
        """The state's element names, in the order published."""
        return list(self.spec.obs_names)

    @property
    def action_names(self) -> list[str]:
        """The command's element names, in the order applied."""
        return list(self.spec.action_names)

    def _apply_params(self, changed: dict[str, Any]) -> str | None:
        """Apply the :data:`LIVE_PARAMS` in ``changed``; refuse (with the reason) the rest."""
        reason = refuse_unless_live(changed, LIVE_PARAMS)
        if reason is not None:
            return reason
        for name, value in changed.items():
            if name == "rate_hz":
                self.rate_hz = float(value) or float(self.spec.control_hz)
                self.period_s = 1.0 / self.rate_hz
                self.steps = IntervalMeter(self.period_s)
            elif name == "command_max_age_s":
                self.guard.bounds.command_max_age_s = float(value)
            elif name == "diagnostics_period_s":
                self.diagnostics.set_period(value)
            elif name in ("command_timeout_s",):
                self.command_timeout_s = float(value)
            elif name == "expert_horizon":
                self.expert_horizon = int(value)
            elif name == "expert_every":
                self.expert_every = max(1, int(value))
            else:  # command_field, publish_expert, wait_for_command
                setattr(self, name, value)
        self.get_logger().info(f"parameters applied: {changed}")
        return None

    # --- commands in -------------------------------------------------------------------
    def accept_command(self, values: np.ndarray, stamp_ns: int, now_ns: int | None = None,
                       from_edit: bool = True) -> bool:
        """Apply ``values`` (``(action_dim,)``, the task's action order) computed from the
        state stamped ``stamp_ns`` (ns, wall clock; 0 = unstamped), received at ``now_ns``
        (default now), after the guard's checks; ``from_edit`` commands count in the e2e
        latency. Called by :meth:`_on_command` and by a composed edit node. Returns whether it
        was applied (a refusal is counted under its reason)."""
        now_ns = time.time_ns() if now_ns is None else now_ns
        if not guard_passes(self.guard, self.drops, values, stamp_ns, now_ns):
            return False
        received_ns = self.take_received_ns()
        if from_edit:
            self.latency.answer(stamp_ns, now_ns)
            if received_ns:
                self.wire_latency.answer(stamp_ns, received_ns)
        with self._lock:
            self._command = values
            self._command_time = time.perf_counter()
            self.commands_received += 1
        return True

    def _current_action(self, now: float) -> np.ndarray:
        with self._lock:
            cmd, t = self._command, self._command_time
        if cmd is None:
            return np.zeros(self.spec.action_dim, dtype=np.float32)
        if now - t > self.command_timeout_s:
            self.watchdog_trips += 1
            return np.zeros(self.spec.action_dim, dtype=np.float32)
        return cmd

    # --- stepping ----------------------------------------------------------------------
    def expert_rows(self) -> np.ndarray:
        """The privileged expert's chunk for the current state, ``(expert_horizon, A)``."""
        if hasattr(self.env, "expert_chunk"):
            return self.env.expert_chunk(self.expert_horizon)[0].numpy()
        action = self.env.expert_action()[0].numpy()
        return np.repeat(action[None], self.expert_horizon, axis=0)

    def _publish_state(self, step: int, stamp: int | None = None) -> None:
        """Publish the current state (and expert chunk) stamped ``stamp`` (ns; default now)."""
        stamp = time.time_ns() if stamp is None else stamp
        obs = self.obs[0].numpy()
        if self.link is not None:  # the composed edit node ticks on it first
            self.link.state(obs, stamp)
        self.state_pub.publish(make_joint_state(self.spec.obs_names, obs, stamp))
        if self.publish_expert and step % self.expert_every == 0 \
                and self.expert_pub.get_subscription_count() > 0:  # 0.7-3.8 ms a chunk
            t_obs = self.timebase.to_mono(stamp)
            chunk = ActionChunk(self.expert_rows(), t0=t_obs, dt=self.period_s,
                                obs_time=t_obs, source="expert")
            self.expert_pub.publish(chunk_to_trajectory(chunk, self.spec.action_names,
                                                        self.timebase, stamp))

    def _announce_reset(self, stamp_ns: int) -> None:
        """``robot/episode``: the new episode starts with the state stamped ``stamp_ns``."""
        if self.link is not None and self.announce_resets:
            self.link.episode(stamp_ns)
        if self.episode_pub is not None:
            msg = Header(frame_id=str(self.episodes))
            msg.stamp = ns_to_stamp(stamp_ns)
            self.episode_pub.publish(msg)

    def _run(self) -> None:
        # inference mode: no autograd or version-counter bookkeeping on the task's tensors
        # (measured on cartpole, one env: step 0.61 -> 0.44 ms, a 10-row expert chunk
        # 5.3 -> 3.0 ms); the robot never differentiates through its physics
        with self._torch.inference_mode():
            self._step_forever()

    def _step_forever(self) -> None:
        clock = MonotonicClock()
        torch = self._torch
        step = 0
        try:
            self._publish_state(step)
            t_next = clock.now() + self.period_s
            while not self._stop.is_set():
                period = self.period_s  # may change at run time (rate_hz parameter)
                clock.sleep_until(t_next)
                now = clock.now()
                if self.wait_for_command and self.commands_received == 0:
                    self._publish_state(step)  # idle until commanded
                    t_next += period
                    continue
                self.steps.mark(now)
                action = torch.as_tensor(self._current_action(now), dtype=torch.float32)[None]
                obs, _rew, dones, extras = self.env.step(action)
                self.obs = obs["policy"]
                reset = bool(dones.any())
                if reset:
                    self.episodes += 1
                success = extras.get("success") if isinstance(extras, dict) else None
                if success is not None and bool(torch.as_tensor(success).any()):
                    self.successes += 1
                step += 1
                stamp = time.time_ns()
                if reset:  # announced first, so receivers drop the old episode before its
                    self._announce_reset(stamp)  # first state (stamp) arrives
                self._publish_state(step, stamp)
                t_next += period
                late = clock.now() - t_next
                if late > 0:
                    self.late_steps += 1
                if late > 10 * period:  # fell far behind (suspended): resync
                    self.resyncs += 1
                    t_next = clock.now() + period
        except Exception:
            self.get_logger().error("sim robot stepping failed; stopping")
            log.exception("sim robot stepping failed")
            self.failed = True

    # --- diagnostics -------------------------------------------------------------------
    def values(self) -> dict[str, Any]:
        foreign, early = self._edit_source.refused_by_origin()  # one graph lookup
        return {
            "step_rate_hz": self.steps.rate_hz(),
            "configured_rate_hz": self.rate_hz,
            "step_jitter_p99_us": self.steps.jitter_p99_s() * 1e6,
            "steps": self.steps.count,
            "episodes": self.episodes,
            "successes": self.successes,
            "commands_received": self.commands_received,
            "commands_foreign": foreign,
            "commands_before_discovery": early,
            "commands_repeat_state": self.commands_repeat_state,
            "watchdog_trips": self.watchdog_trips,
            "late_steps": self.late_steps,
            "resyncs": self.resyncs,
            "e2e_latency_p50_us": self.latency.percentile(50) * 1e6,
            "e2e_latency_p99_us": self.latency.percentile(99) * 1e6,
            "e2e_wire_latency_p50_us": self.wire_latency.percentile(50) * 1e6,
            "e2e_wire_latency_p99_us": self.wire_latency.percentile(99) * 1e6,
            **self.drops.values(),
        }

    def _report(self) -> Report:
        level = 1 if self.drops.total else 0
        msg = self.drops.last_reason if self.drops.total else "ok"
        return self.spec.name, self.values(), level, msg

    def shutdown(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)
        self.env.close()


def main(args: list[str] | None = None) -> int:
    return run_node(SimRobotNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
