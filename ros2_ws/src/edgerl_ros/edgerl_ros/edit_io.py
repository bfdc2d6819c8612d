"""``EditNodeIO``: the edit node's inputs and output (a mixin of
:class:`~edgerl_ros.edit_policy_node.EditPolicyNode`, which holds the state it uses).

In: states (``robot/joint_states`` or a composed robot's :meth:`accept_state`), chunks
(``planner/chunk``), episode resets (``robot/episode`` or :meth:`accept_episode`) and the
operator's e-stop re-arm (``robot/estop_reset``) and interventions (``operator/intervention``:
override / e-stop / release, :mod:`edgerl.contract.intervention`), each checked by the manifest's
:class:`~edgerl.runtime.input_guard.InputGuard` and, refused, counted by reason. Out: one
``robot/command`` per tick, stamped with the state it answers (composed: handed to the robot
first, published after the tick).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from trajectory_msgs.msg import JointTrajectory

from edgerl_ros.common import TOPICS
from edgerl_ros.composition import IN_PROCESS_FRAME
from edgerl_ros.messages import (
    BadMessage,
    make_joint_state,
    stamp_to_ns,
    stamped_state,
    trajectory_to_chunk,
)

__all__ = ["EditNodeIO"]

log = logging.getLogger(__name__)


class EditNodeIO:
    """Input callbacks, ``accept_*`` entry points and the command sink (see the module doc)."""

    _inline: Any
    transitions: Any  # edgerl_ros.edit_transitions.TransitionRecording or None
    _fallback_timer: Any
    _prewarm_timer: Any
    operator: Any  # edgerl_ros.operator.OperatorGate once configured

    def _on_state(self, msg: JointState) -> None:
        if self.spec is None:
            return
        try:
            obs, stamp = stamped_state(msg, self.spec.observation.names)
        except BadMessage as exc:
            self.drops.drop(TOPICS["state"], str(exc))
            return
        self.accept_state(obs, stamp)

    def accept_state(self, obs: np.ndarray, stamp_ns: int) -> bool:
        """A state (``(obs_dim,)`` in the manifest's observation order) stamped ``stamp_ns``
        (ns, wall clock): checked, written to the slot and, with inline ticks, ticked on at
        once. Called by the state subscription and by a composed robot (its stepping thread:
        the inline trigger serialises it with the fallback timer). Returns whether it was
        accepted (a refusal is counted under its reason)."""
        slot = self._slot
        if self.spec is None or slot is None:
            return False
        reason = self.guard.check_state(stamp_ns * 1e-9, time.time_ns() * 1e-9)
        if reason is not None:  # too old / stamped ahead: must not drive the loop
            self.drops.drop(TOPICS["state"], reason)
            return False
        t = self.timebase.to_mono(stamp_ns)
        slot.write_stamped(obs, t, stamp_ns)
        self.states_received += 1
        inline = self._inline
        if inline is not None:
            if threading.get_ident() not in self._rt_threads:
                self._realtime_here()
            inline.on_state(t)
            self._flush_publish()  # composed: the command the robot already has
            if not self._reset_timers_per_state:  # composed: the fallback thread's check
                return True
            for timer in (self._fallback_timer, self._prewarm_timer):
                if timer is not None:  # None/destroyed: deactivated meanwhile (composed robot)
                    try:
                        timer.reset()
                    except Exception as exc:
                        log.debug("timer reset after deactivation: %s", exc)
        return True

    def _realtime_here(self) -> None:
        """Inline ticks run in the thread that delivers the state (the executor's, or a
        composed robot's stepping thread), not in a loop thread: give that thread, once, the
        node's ``rt_priority`` (SCHED_FIFO) and the loop's ``loop_cpus``. A refusal is logged
        and the ticks run at normal priority."""
        from edgerl.runtime.cpu_affinity import pin_thread
        from edgerl.runtime.loop_scheduler import set_fifo

        self._rt_threads.add(threading.get_ident())
        prio = int(self.get_parameter("rt_priority").value)
        if prio > 0 and set_fifo(prio):  # a refusal is logged there
            self.rt_applied = True
        loop = self.loop
        if loop is not None and loop.cfg.cpus:
            try:
                self.inline_cpus = pin_thread(loop.cfg.cpus, "loop_cpus (inline state ticks)")
            except (OSError, ValueError) as exc:
                log.warning("inline state ticks: loop_cpus not applied (%s)", exc)

    def _on_silence(self) -> None:
        """No state for a trigger timeout: the clock fallback tick."""
        if self._inline is not None:
            self._inline.tick_if_starved(slack_s=0.1 * self.loop.trigger_timeout_s)
            self._flush_publish()

    def _on_chunk(self, msg: JointTrajectory) -> None:
        spec, loop = self.spec, self.loop
        if spec is None or loop is None:
            return
        if stamp_to_ns(msg.header.stamp) < self.reset_stamp_ns:  # planned in an old episode
            self.chunks_dropped_pre_reset += 1
            return
        reason = self.guard.check_chunk_rows(len(msg.points))  # before converting 20k rows
        if reason is not None:
            self.drops.drop(TOPICS["chunk"], reason)
            return
        try:
            chunk = trajectory_to_chunk(msg, spec.action.names, self.timebase)
            now = time.perf_counter()
            reason = self.guard.check_chunk(chunk, now)
            if reason is not None:
                raise BadMessage(reason)
            loop.buffer.push(chunk, now)
        except (BadMessage, ValueError) as exc:
            self.drops.drop(TOPICS["chunk"], str(exc))
            return
        loop.metrics.planner_latency_s.append(now - chunk.obs_time)

    def _on_episode(self, msg: Header) -> None:
        self.accept_episode(stamp_to_ns(msg.stamp))

    def accept_episode(self, stamp_ns: int) -> None:
        """Episode reset: the new episode's first state is stamped ``stamp_ns``; forget the
        old episode's chunk and history (see the module doc). Called by the episode
        subscription and by a composed robot."""
        loop = self.loop
        if loop is None or stamp_ns <= self.reset_stamp_ns:  # duplicate / out of order
            return
        # a reset stamped far ahead would drop every chunk until then (found by the soak)
        reason = self.guard.check_state(stamp_ns * 1e-9, time.time_ns() * 1e-9)
        if reason is not None:
            self.drops.drop(TOPICS["episode"], reason)
            return
        self.reset_stamp_ns = stamp_ns  # first: later chunks of the old episode are dropped
        loop.buffer.clear()
        loop.request_reset()
        self.episode_resets += 1
        if self.transitions is not None:  # the ended episode's ticks into the file
            self.transitions.drain()

    def _on_estop_reset(self, msg: Header) -> None:
        """Operator re-arm (``robot/estop_reset``, a fresh ``Header`` stamp signed with the
        operator key, :mod:`edgerl_ros.operator`): release the e-stop latch and the
        escalation ladder. An unsigned, wrongly signed or replayed reset, or one stamped old or
        ahead, is refused and counted by reason."""
        loop = self.loop
        if loop is None:
            return
        reason = self._operator_refusal(TOPICS["estop_reset"], msg)
        if reason is not None:
            self.drops.drop(TOPICS["estop_reset"], reason)
            return
        reason = self.guard.check_state(stamp_to_ns(msg.stamp) * 1e-9, time.time_ns() * 1e-9)
        if reason is not None:
            self.drops.drop(TOPICS["estop_reset"], reason)
            return
        if loop.safety.estopped:
            loop.reset_estop()
            self.estop_resets += 1

    def _on_intervention(self, msg: JointState) -> None:
        """Operator intervention (``operator/intervention``: ``name = [kind]``, ``position``
        = the override command, ``header.stamp`` wall clock): moved onto the loop's clock by
        its age and pushed into the loop's slot; a record that fails
        :func:`~edgerl.contract.intervention.validate_intervention`, or an ``override`` /
        ``release`` not signed with the operator key (:mod:`edgerl_ros.operator`), is counted
        by reason. An ``estop`` is taken from any node: stopping is always allowed."""
        from edgerl.contract.intervention import Intervention, InterventionError
        from edgerl.contract.operator_auth import intervention_payload

        loop = self.loop
        if loop is None:
            return
        kind = msg.name[0] if len(msg.name) == 1 else f"<{len(msg.name)} names>"
        # stopping is open to any node (fail safe); taking over or releasing needs the key
        reason = None if kind == "estop" else self._operator_refusal(
            TOPICS["intervention"], msg.header, intervention_payload(kind, msg.position))
        if reason is not None:
            self.drops.drop(TOPICS["intervention"], reason)
            return
        age_s = (time.time_ns() - stamp_to_ns(msg.header.stamp)) * 1e-9
        now = loop.clock.now()
        iv = Intervention(kind, now - age_s, np.asarray(msg.position, np.float32))
        try:
            loop.interventions.push(iv, now)
        except InterventionError as exc:
            self.drops.drop(TOPICS["intervention"], exc.reason)
            log.debug("intervention refused: %s", exc)
            return
        self.interventions_applied += 1
        if self.transitions is not None:  # edgerl_ros.edit_transitions
            self.transitions.write_intervention(iv)

    def _operator_refusal(self, topic: str, header: Header, payload: bytes = b"") -> str | None:
        """Why an operator message on ``topic`` is refused (None: it is the operator's)."""
        gate = self.operator
        if gate is None:
            return "no_operator_gate"
        return gate.check(topic, header, payload)

    def _send(self, command: np.ndarray, t: float) -> bool:
        """CommandSink: one JointState per tick, stamped with the state it answers."""
        pub, spec, slot = self._cmd_pub, self.spec, self._slot
        if pub is None or spec is None or slot is None:
            return False
        stamp = slot.read_stamp_ns()
        if stamp:
            self.state_age.add(t - slot.read_t)  # transit + wait for this tick
        link = self.command_link
        frame_id = ""
        if link is not None:  # composed robot: straight in, then published for the others
            link(command, stamp)
            if self._inline is not None:  # published once the tick has returned
                self._pending = (command.copy(), stamp)
                return True
            frame_id = IN_PROCESS_FRAME  # (a loop thread ticks): marked as the flushed ones
        return self._publish_command(command, stamp, frame_id)

    def _publish_command(self, command: np.ndarray, stamp: int, frame_id: str = "") -> bool:
        """``robot/command``: the command for the state stamped ``stamp`` (ns)."""
        pub, spec = self._cmd_pub, self.spec
        if pub is None or spec is None:
            return False
        try:
            pub.publish(make_joint_state(spec.action.names, command, stamp, self.command_field,
                                         frame_id))
        except Exception as exc:  # context shut down / middleware error: transport down
            log.debug("command publish failed: %s", exc)
            return False
        self.commands_sent += 1
        return True

    def _flush_publish(self) -> None:
        """Composed inline ticks: publish the command the robot already has (off the
        state -> command path: the tick ends when the robot has it)."""
        pending, self._pending = self._pending, None
        if pending is not None:  # marked: no robot node executes it from the topic
            self._publish_command(*pending, frame_id=IN_PROCESS_FRAME)
