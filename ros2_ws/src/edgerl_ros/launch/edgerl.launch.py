"""Launch edgerl's node graph on a full ROS 2 install (``ros2 launch edgerl_ros edgerl.launch.py
bundle:=/path/to/bundle task:=cartpole``); ``edgerl deploy`` starts the same graph where only
pip rclpy exists.

The edit policy is a lifecycle node: ``autostart`` configures and activates it itself; set
``autostart:=false`` to drive it with ``ros2 lifecycle set /edit_policy_node configure``.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node


def generate_launch_description() -> LaunchDescription:
    params = os.path.join(get_package_share_directory("edgerl_ros"), "config", "edgerl.yaml")
    bundle = LaunchConfiguration("bundle")
    task = LaunchConfiguration("task")
    return LaunchDescription([
        DeclareLaunchArgument("bundle", description="bundle directory (manifest.json + ONNX)"),
        DeclareLaunchArgument("task", default_value="cartpole", description="sim task"),
        DeclareLaunchArgument("sim", default_value="true", description="run sim_robot_node"),
        DeclareLaunchArgument("autostart", default_value="true",
                              description="edit policy configures + activates itself"),
        Node(package="edgerl_ros", executable="sim_robot_node", name="sim_robot_node",
             parameters=[params, {"task": task}], output="screen",
             condition=IfCondition(LaunchConfiguration("sim"))),
        Node(package="edgerl_ros", executable="planner_node", name="planner_node",
             parameters=[params, {"bundle": bundle}], output="screen"),
        LifecycleNode(package="edgerl_ros", executable="edit_policy_node",
                      name="edit_policy_node", namespace="",
                      parameters=[params, {"bundle": bundle,
                                           "autostart": LaunchConfiguration("autostart")}],
                      output="screen"),
    ])
