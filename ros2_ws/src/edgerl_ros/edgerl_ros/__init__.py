"""edgerl's ROS 2 nodes: thin rclpy shells over :mod:`edgerl.runtime` classes.

Executables (``python -m edgerl_ros.<node>`` or the console scripts of the same name):
``edit_policy_node`` (lifecycle; the fast loop), ``planner_node``, ``sim_robot_node``,
``serial_bridge_node``, ``ros2_control_bridge_node``; :mod:`edgerl_ros.executables` is their
table. :mod:`edgerl_ros.graph` starts them as processes for ``edgerl deploy``.
"""
