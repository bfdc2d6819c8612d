"""In-process composition: a robot node and the edit node in one process, linked by calls.

Across processes each state and each command crosses the middleware: on this machine a bare
rclpy ``JointState`` round trip between two processes costs 0.8-1.6 ms p50 at a 5-20 ms pace
(``benchmarks/ros2_roundtrip.py``), more than the whole e2e budget of a fast loop. ROS 2's
answer is composition: the fast path runs in the driver's process. :class:`ComposedLink`
connects a robot node (``SimRobotNode``, ``SerialBridgeNode``) to an :class:`EditPolicyNode` whose
``state_source`` is ``in_process``:

* the robot hands each state (``link.state``) and each episode reset (``link.episode``, before
  the new episode's first state) to the edit node in its stepping thread, before publishing;
* the edit node hands each command (``link.command``) straight to the robot's
  ``accept_command`` (the same guard checks as a received message), then publishes it.

Topics are still published (the planner, recorders, monitors see the same graph). The composed
edit node marks its command messages ``header.frame_id = IN_PROCESS_FRAME`` (the robot already
has them), and robot nodes subscribe to ``robot/command`` through
:func:`subscribe_commands`, a DDS content filter that drops marked messages in the middleware:
otherwise each of them wakes rclpy's Python executor in the robot's process (~1 ms of GIL per
wake, taken from the stepping thread that runs the state -> command path). Names are matched
once, when the link is built: the manifest's observation and action names must be the
robot's, in any order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["IN_PROCESS_FRAME", "ComposedLink", "CompositionError", "subscribe_commands"]

log = logging.getLogger(__name__)

#: ``header.frame_id`` of a command a composed edit node already handed to the robot of its
#: own process: published for observers, executed by no robot node from the topic.
IN_PROCESS_FRAME = "edgerl/in_process"


class CompositionError(ValueError):
    """The robot and the bundle do not fit together (names), or a node is not configured."""


def subscribe_commands(node: Any, callback: Callable[..., None], qos: Any) -> Any:
    """``node``'s ``robot/command`` subscription, without the commands marked
    :data:`IN_PROCESS_FRAME` where the middleware filters content (Fast DDS does); elsewhere
    they arrive and ``callback`` must drop them (:func:`in_process_command`)."""
    from rclpy.subscription_content_filter_options import ContentFilterOptions
    from sensor_msgs.msg import JointState

    from edgerl_ros.common import TOPICS

    skip = ContentFilterOptions(filter_expression="header.frame_id <> %0",
                                expression_parameters=[f"'{IN_PROCESS_FRAME}'"])
    try:
        sub = node.create_subscription(JointState, TOPICS["command"], callback, qos,
                                       content_filter_options=skip)
        if sub.is_cft_enabled:
            return sub
        node.destroy_subscription(sub)
    except Exception as exc:  # an rmw without content filters
        log.debug("no content filter on robot/command: %s", exc)
    return node.create_subscription(JointState, TOPICS["command"], callback, qos)


def in_process_command(msg: Any) -> bool:
    """Whether a received command was already delivered in process (see the module doc)."""
    return msg.header.frame_id == IN_PROCESS_FRAME


def _index(want: list[str], have: list[str], what: str) -> np.ndarray | None:
    """Indices into ``have`` giving ``want``'s order (``None``: the same order)."""
    missing = [n for n in want if n not in have]
    extra = [n for n in have if n not in want]
    if missing or extra:
        raise CompositionError(f"{what} names differ: bundle has {missing or 'no'} extra, "
                               f"robot has {extra or 'no'} extra")
    idx = np.asarray([have.index(n) for n in want], dtype=np.intp)
    return None if np.array_equal(idx, np.arange(len(want))) else idx


class ComposedLink:
    """Calls between a robot node and a configured, ``in_process`` edit node.

    Args:
        robot: Node with ``obs_names``, ``action_names``, a ``link`` attribute and
            ``accept_command(values, stamp_ns)`` (``SimRobotNode``, ``SerialBridgeNode``).
        edit: :class:`~edgerl_ros.edit_policy_node.EditPolicyNode`, configured.

    Raises:
        CompositionError: the edit node is not configured, does not take in-process states,
            or the names differ.
    """

    def __init__(self, robot: Any, edit: Any) -> None:
        if edit.spec is None:
            raise CompositionError("the edit node is not configured (bundle not loaded)")
        if edit.get_parameter("state_source").value != "in_process":
            raise CompositionError("the edit node's state_source must be 'in_process' (it "
                                   "would also tick on the state topic)")
        self.robot, self.edit = robot, edit
        # robot order -> manifest order (states); manifest order -> robot order (commands)
        self._obs_idx = _index(list(edit.spec.observation.names), list(robot.obs_names),
                               "observation")
        self._act_idx = _index(list(robot.action_names), list(edit.spec.action.names),
                               "action")
        self.states = self.commands = self.episodes = 0

    def attach(self) -> None:
        """Start routing: states/resets to the edit node, commands to the robot."""
        self.edit.command_link = self.command
        self.robot.link = self

    def detach(self) -> None:
        """Stop routing (the robot first: no new state reaches a node being torn down)."""
        self.robot.link = None
        self.edit.command_link = None

    def state(self, obs: np.ndarray, stamp_ns: int) -> None:
        """Robot -> edit: ``obs`` ``(O,)`` in the robot's order, stamped ``stamp_ns`` (ns)."""
        self.states += 1
        self.edit.accept_state(obs if self._obs_idx is None else obs[self._obs_idx], stamp_ns)

    def episode(self, stamp_ns: int) -> None:
        """Robot -> edit: a new episode starts with the state stamped ``stamp_ns``."""
        self.episodes += 1
        self.edit.accept_episode(stamp_ns)

    def command(self, command: np.ndarray, stamp_ns: int) -> None:
        """Edit -> robot: ``command`` ``(A,)`` in the manifest's order (a copy is applied:
        the loop reuses its buffer), for the state stamped ``stamp_ns``."""
        self.commands += 1
        values = np.array(command if self._act_idx is None else command[self._act_idx],
                          dtype=np.float32)
        self.robot.accept_command(values, stamp_ns)
