"""The package's executables by name: each node's module and the processes that host several.

``edgerl_ros.graph_config`` and ``edgerl_ros.processes`` start them; the package's setup.py
registers the same names as console scripts. Only the graph level imports this table (it
names the node modules, so no node imports it back).
"""

from __future__ import annotations

__all__ = ["CONTAINERS", "NODE_MODULES"]

#: executable name -> module (``python -m`` target); setup.py registers the same names.
NODE_MODULES: dict[str, str] = {
    "edit_policy_node": "edgerl_ros.edit_policy_node",
    "planner_node": "edgerl_ros.planner_node",
    "sim_robot_node": "edgerl_ros.sim_robot_node",
    "serial_bridge_node": "edgerl_ros.serial_bridge_node",
    "ros2_control_bridge_node": "edgerl_ros.ros2_control_bridge_node",
}
#: Processes that host several nodes (``edgerl deploy --compose``): module, nodes hosted.
CONTAINERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "robot_edit_container": ("edgerl_ros.container", ("sim_robot_node", "edit_policy_node")),
    "serial_edit_container": ("edgerl_ros.container",
                              ("serial_bridge_node", "edit_policy_node")),
}
