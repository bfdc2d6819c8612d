"""``edgerl_ros.container``: the sim robot and the edit policy composed in one process.

``python -m edgerl_ros.container --ros-args --params-file FILE``: FILE holds both nodes'
parameters under their names (``sim_robot_node``, ``edit_policy_node``), as
``edgerl deploy --compose`` writes it. The edit node is created first, configured and
activated with ``state_source: in_process`` (forced here), then the robot, then the
:class:`~edgerl_ros.composition.ComposedLink` between them; one executor spins both nodes
(chunks, timers, diagnostics); the state -> command path runs in the robot's stepping thread.
Shutdown detaches the link, stops the robot, then the edit node.
"""

from __future__ import annotations

import logging
from typing import Any

from edgerl_ros.common import run_node
from edgerl_ros.composition import ComposedLink

__all__ = ["Composition", "main"]

log = logging.getLogger(__name__)


class Composition:
    """The nodes of one process for :func:`~edgerl_ros.common.run_node` (``nodes``,
    ``failed``, ``shutdown``, ``destroy_node``)."""

    def __init__(self) -> None:
        from rclpy.lifecycle import TransitionCallbackReturn
        from rclpy.parameter import Parameter

        from edgerl_ros.edit_policy_node import EditPolicyNode
        from edgerl_ros.sim_robot_node import SimRobotNode

        self.edit = EditPolicyNode(parameter_overrides=[
            Parameter("state_source", Parameter.Type.STRING, "in_process")])
        self.robot = None
        self.link: ComposedLink | None = None
        self._failed = False
        if self.edit.trigger_configure() != TransitionCallbackReturn.SUCCESS:
            self._failed = True  # the reason is in the edit node's log
            self.nodes: list[Any] = [self.edit]
            return
        self.edit.trigger_activate()  # ticks from the first linked state on
        self.robot = SimRobotNode()
        self.nodes = [self.edit, self.robot]
        self.link = ComposedLink(self.robot, self.edit)  # CompositionError: names differ
        self.link.attach()
        log.info("composed: %s -> edit_policy_node in process", self.robot.get_name())

    @property
    def failed(self) -> bool:
        return self._failed or any(getattr(n, "failed", False) for n in self.nodes)

    def shutdown(self) -> None:
        if self.link is not None:
            self.link.detach()
        for node in reversed(self.nodes):  # the robot's stepping thread first
            node.shutdown()

    def destroy_node(self) -> None:
        for node in reversed(self.nodes):
            node.destroy_node()


def main(args: list[str] | None = None) -> int:
    return run_node(Composition, args)


if __name__ == "__main__":
    raise SystemExit(main())
