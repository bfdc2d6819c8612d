"""Launch edgerl's node graph on a full ROS 2 install (``ros2 launch edgerl_ros edgerl.launch.py
bundle:=/path/to/bundle task:=cartpole``); ``edgerl deploy`` starts the same graph where only
pip rclpy exists.

``robot`` picks the robot side: ``sim`` (default; ``sim_robot_node``, needs torch + MuJoCo),
``serial`` (``serial_bridge_node`` to the edgerl firmware: ``port:=/dev/ttyACM0
baud:=1000000``), ``ros2_control`` (``ros2_control_bridge_node``: ``/joint_states`` and a
forward_command_controller / JointTrajectoryController, mapped in the parameter file) or
``ros`` (nothing: the robot's own driver speaks ``robot/joint_states`` / ``robot/command``).
Only ``sim`` starts a node that imports torch.
``device:=auto|cpu|cuda|tensorrt`` sets the onnxruntime device of the planner and edit policy.

The edit policy is a lifecycle node: ``autostart`` configures and activates it itself; set
``autostart:=false`` to drive it with ``ros2 lifecycle set /edit_policy_node configure``.
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import LaunchConfigurationEquals
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import LifecycleNode, Node
from launch_ros.parameter_descriptions import ParameterValue


def generate_launch_description() -> LaunchDescription:
    params = os.path.join(get_package_share_directory("edgerl_ros"), "config", "edgerl.yaml")
    bundle = LaunchConfiguration("bundle")
    task = LaunchConfiguration("task")
    device = LaunchConfiguration("device")
    return LaunchDescription([
        DeclareLaunchArgument("bundle", description="bundle directory (manifest.json + ONNX)"),
        DeclareLaunchArgument("task", default_value="cartpole", description="sim task"),
        DeclareLaunchArgument("robot", default_value="sim",
                              choices=["sim", "serial", "ros2_control", "ros"],
                              description="robot side: sim_robot_node, serial_bridge_node "
                                          "(edgerl firmware) or the robot's own ROS driver"),
        DeclareLaunchArgument("port", default_value="/dev/ttyACM0",
                              description="serial device (robot:=serial)"),
        DeclareLaunchArgument("baud", default_value="1000000",
                              description="UART baud rate (robot:=serial)"),
        DeclareLaunchArgument("device", default_value="auto",
                              choices=["auto", "cpu", "cuda", "tensorrt"],
                              description="onnxruntime device of the planner and edit policy"),
        DeclareLaunchArgument("autostart", default_value="true",
                              description="edit policy configures + activates itself"),
        Node(package="edgerl_ros", executable="sim_robot_node", name="sim_robot_node",
             parameters=[params, {"task": task}], output="screen",
             condition=LaunchConfigurationEquals("robot", "sim")),
        Node(package="edgerl_ros", executable="serial_bridge_node", name="serial_bridge_node",
             parameters=[params, {"bundle": bundle, "port": LaunchConfiguration("port"),
                                  "baudrate": ParameterValue(LaunchConfiguration("baud"),
                                                             value_type=int)}],
             output="screen", condition=LaunchConfigurationEquals("robot", "serial")),
        Node(package="edgerl_ros", executable="ros2_control_bridge_node",
             name="ros2_control_bridge_node", parameters=[params, {"bundle": bundle}],
             output="screen", condition=LaunchConfigurationEquals("robot", "ros2_control")),
        Node(package="edgerl_ros", executable="planner_node", name="planner_node",
             parameters=[params, {"bundle": bundle, "device": device}], output="screen"),
        LifecycleNode(package="edgerl_ros", executable="edit_policy_node",
                      name="edit_policy_node", namespace="",
                      parameters=[params, {"bundle": bundle, "device": device,
                                           "autostart": LaunchConfiguration("autostart")}],
                      output="screen"),
    ])
