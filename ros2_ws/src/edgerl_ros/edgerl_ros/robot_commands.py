"""``robot/command`` on the robot side: the intake the sim robot, the serial bridge and the
ros2_control bridge share.

A command is read in the bundle's action order (:func:`command_values`) and checked by the
:class:`~edgerl.runtime.input_guard.InputGuard` (age against its state stamp, stamps ahead,
limits: :func:`guard_passes`) before the node applies it; each refusal is counted under
``robot/command`` with its reason. Robots that host a composed edit node
(:class:`ComposableCommands`) take that node's commands by call, so its topic copies are
skipped, and count only the edit node's commands in their e2e latency.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from edgerl_ros.common import TOPICS
from edgerl_ros.composition import in_process_command, subscribe_commands
from edgerl_ros.messages import BadMessage, joint_state_values, stamp_to_ns
from edgerl_ros.sources import PublisherFilter
from edgerl_ros.stats import DropCounter

__all__ = ["COMMAND_QUEUE_DEPTH", "ComposableCommands", "command_values", "guard_passes"]

#: Depth of the robots' ``robot/command`` queue (:meth:`ComposableCommands._subscribe_commands`).
COMMAND_QUEUE_DEPTH = 8


def command_values(msg: Any, names: Sequence[str], field: str,
                   drops: DropCounter) -> np.ndarray | None:
    """``(A,)`` float32 values of a command ``JointState`` in ``names`` order, read from
    ``field``; None for a bad message (counted in ``drops`` under its reason)."""
    try:
        return joint_state_values(msg, names, field)
    except BadMessage as exc:
        drops.drop(TOPICS["command"], str(exc))
        return None


def guard_passes(guard: Any, drops: DropCounter, values: np.ndarray, stamp_ns: int,
                 now_ns: int) -> bool:
    """Whether ``values``, computed from the state stamped ``stamp_ns`` (ns, wall clock; 0 =
    unstamped) and received at ``now_ns``, pass ``guard``'s command checks; a refusal (old,
    unstamped, ahead or out of limits: never executed) is counted in ``drops``."""
    reason = guard.check_command(values, stamp_ns * 1e-9 if stamp_ns > 0 else None,
                                 now_ns * 1e-9)
    if reason is not None:
        drops.drop(TOPICS["command"], reason)
        return False
    return True


class ComposableCommands:
    """The ``robot/command`` subscription of a robot node that may host a composed edit node
    (a mixin of the rclpy node).

    The node provides ``action_names``, ``command_field``, ``drops``, ``link`` (the composed
    edit node's :class:`~edgerl_ros.composition.ComposedLink`, or None) and
    ``accept_command(values, stamp_ns, now_ns, from_edit=...)``, which applies a command.
    """

    action_names: Any
    command_field: str
    drops: DropCounter
    link: Any
    command_source: str

    def _subscribe_commands(self, qos: Any, source: str = "edit_policy_node") -> None:
        """Subscribe to ``robot/command`` (without a composed edit node's marked copies) and
        tell the edit node's commands from other publishers': with a ``source`` node name
        (the ``command_source`` parameter) only that node's commands are executed, the others
        are refused as ``foreign``; empty: any publisher's are (counted apart in latency)."""
        from rclpy.qos import QoSProfile

        from edgerl_ros.session import qos_kwargs

        self.command_source = source
        self._edit_source = PublisherFilter(self, TOPICS["command"],
                                            source or "edit_policy_node")
        # a queue deeper than one: another publisher's burst must not push the edit node's
        # newest command out before it is read (each is then checked, the newest applied)
        kw = qos_kwargs(qos)
        kw["depth"] = max(int(kw.get("depth") or 1), COMMAND_QUEUE_DEPTH)
        self._command_sub = subscribe_commands(self, self._on_command, QoSProfile(**kw))

    def _on_command(self, msg: Any, info: Any) -> None:
        """A command (``info``: rclpy ``MessageInfo``, its publisher GID)."""
        if in_process_command(msg):
            return  # a composed edit node's command: handed over in its own process
        now_ns = time.time_ns()
        #: when the middleware received it (ns, wall clock; 0 unknown): the robot's own
        #: executor wait excluded, for the wire latency (:meth:`take_received_ns`)
        self._received_ns = int(info.get("received_timestamp") or 0) \
            if isinstance(info, dict) else 0
        from_edit = self._edit_source.accept(info)
        if not from_edit and self.command_source:
            self.drops.drop(TOPICS["command"], f"foreign: not published by "
                                               f"{self.command_source}")
            return
        if from_edit and self.link is not None:
            return  # the composed edit node's command: already handed over by call
        values = command_values(msg, self.action_names, self.command_field, self.drops)
        if values is not None:
            self.accept_command(values, stamp_to_ns(msg.header.stamp), now_ns,
                                from_edit=from_edit)

    def take_received_ns(self) -> int:
        """The middleware receive time (ns) of the command being applied, once (0 for a
        command handed over by call, or when the middleware does not report it)."""
        received, self._received_ns = getattr(self, "_received_ns", 0), 0
        return received
