"""Launch edgerl's node graph on a full ROS 2 install, from the bundle:
``ros2 launch edgerl_ros edgerl.launch.py bundle:=/path/to/bundle [robot:=sim|serial|
ros2_control|ros] [params_file:=my.yaml] [port:=/dev/ttyACM0 baud:=1000000] [device:=auto]
[rt_priority:=N] [trigger:=manifest|state|clock] [loop_cpus:=3] [autostart:=false]
[task:=NAME]``.

The graph is :mod:`edgerl_ros.graph_description`'s, the same one ``edgerl deploy`` starts
where only pip rclpy exists: the arguments are its :data:`LAUNCH_ARGUMENTS`, and an
``OpaqueFunction`` describes the graph at launch time (:func:`describe_launch`) and turns it
into ``Node``/``LifecycleNode`` actions (:func:`launch_actions`). So the sim task, the
observation/action names, the rates and the trigger come from the bundle's manifest; there
is no task to choose (``task:=`` only cross-checks the manifest's). A wrong pairing (a
``task:=`` or a parameter file's sim task other than the manifest's, a ros2_control
``observation_map`` that does not map the bundle's observations, a sim task whose names
differ from the bundle's) stops the launch with ``GraphDescriptionError`` naming both sides
before any node starts; the launch logs the graph it starts (task, rate, trigger, nodes).

``robot``: ``sim`` (``sim_robot_node`` running the manifest's task; needs torch + MuJoCo),
``serial`` (``serial_bridge_node`` to the edgerl firmware on ``port``/``baud``),
``ros2_control`` (``ros2_control_bridge_node``: ``/joint_states`` and a controller, mapped by
``observation_map``/``command_joints`` in ``params_file``) or ``ros`` (no robot node: the
robot's own driver speaks ``robot/joint_states`` / ``robot/command``). ``rt_priority`` puts
the robot node's and the edit node's processes at that SCHED_FIFO priority (as
``edgerl deploy --rt-priority``). The edit policy is a lifecycle node that configures and
activates itself unless ``autostart:=false`` (then ``ros2 lifecycle set /edit_policy_node
configure``).

Tested here without the ``launch`` packages (they are not installable on the development
machine): ``tests/ros2_ws/test_launch_description.py`` imports this file with stand-in
``launch``/``launch_ros`` classes, runs ``generate_launch_description()`` and the
``OpaqueFunction`` on a stand-in context, and checks that the declared arguments are the
description's and the actions its nodes. Not run here: ``ros2 launch`` itself (argument
parsing by ``launch``, ``launch_ros``'s parameter handling, the processes it starts).
"""

from __future__ import annotations

from pathlib import Path


def _default_params_file() -> Path:
    """The installed package's ``config/edgerl.yaml``."""
    from ament_index_python.packages import get_package_share_directory

    return Path(get_package_share_directory("edgerl_ros")) / "config" / "edgerl.yaml"


def _graph_actions(context, *args, **kwargs) -> list:
    """The ``OpaqueFunction``: describe the graph from the launch arguments and the bundle's
    manifest, log it, and return its ``Node``/``LifecycleNode`` actions (raises the named
    ``GraphDescriptionError`` before any of them exists)."""
    from edgerl_ros.graph_description import describe_launch, launch_actions
    from launch.logging import get_logger
    from launch_ros.actions import LifecycleNode, Node

    graph = describe_launch(context.launch_configurations, _default_params_file())
    get_logger("edgerl_ros.launch").info(graph.describe())
    return launch_actions(graph, Node, LifecycleNode)


def generate_launch_description():
    """The description's launch arguments, then the ``OpaqueFunction`` that starts the
    graph."""
    from edgerl_ros.graph_description import LAUNCH_ARGUMENTS
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    return LaunchDescription([
        *(DeclareLaunchArgument(arg.name, default_value=arg.default,
                                description=arg.description,
                                choices=list(arg.choices) if arg.choices else None)
          for arg in LAUNCH_ARGUMENTS),
        OpaqueFunction(function=_graph_actions),
    ])
