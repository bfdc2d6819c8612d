"""``edgerl_ros.container``: a robot node and the edit policy composed in one process.

``python -m edgerl_ros.container ROBOT_NODE --ros-args --params-file FILE``: ROBOT_NODE is
``sim_robot_node`` (default) or ``serial_bridge_node``; FILE holds both nodes' parameters
under their names, as ``edgerl deploy --compose`` writes it. The edit node is created first,
configured and activated with ``state_source: in_process`` (forced here), then the robot, then the
:class:`~edgerl_ros.composition.ComposedLink` between them; one executor spins both nodes
(chunks, timers, diagnostics); the state -> command path runs in the robot's thread (the sim's
stepping thread, the serial bridge's reader thread).
Shutdown detaches the link, stops the robot, then the edit node.
"""

from __future__ import annotations

import logging
from typing import Any

from edgerl_ros.common import run_node
from edgerl_ros.composition import ComposedLink

__all__ = ["ROBOT_CLASSES", "Composition", "main"]

log = logging.getLogger(__name__)

#: Robot nodes a container can host beside the edit node: node name -> (module, class).
ROBOT_CLASSES = {"sim_robot_node": ("edgerl_ros.sim_robot_node", "SimRobotNode"),
                 "serial_bridge_node": ("edgerl_ros.serial_bridge_node", "SerialBridgeNode")}


class Composition:
    """The nodes of one process for :func:`~edgerl_ros.common.run_node` (``nodes``,
    ``failed``, ``shutdown``, ``destroy_node``)."""

    def __init__(self, robot_node: str = "sim_robot_node") -> None:
        import importlib

        from rclpy.lifecycle import TransitionCallbackReturn
        from rclpy.parameter import Parameter

        from edgerl_ros.edit_policy_node import EditPolicyNode

        if robot_node not in ROBOT_CLASSES:
            raise ValueError(f"cannot compose {robot_node!r}: choose one of "
                             f"{', '.join(ROBOT_CLASSES)}")
        module, cls = ROBOT_CLASSES[robot_node]
        robot_cls = getattr(importlib.import_module(module), cls)

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
        self.robot = robot_cls()
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
    import sys

    argv = list(sys.argv[1:] if args is None else args)
    robot = argv.pop(0) if argv and not argv[0].startswith("-") else "sim_robot_node"
    return run_node(lambda: Composition(robot), argv)


if __name__ == "__main__":
    raise SystemExit(main())
