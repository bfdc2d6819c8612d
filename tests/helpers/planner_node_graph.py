"""The planner-node graph the ROS tests drive: a ``PlannerNode`` beside a probe node that
publishes states and hands each chunk to the test, spun by one executor in the test's thread
(tests/ros2_ws/test_planner_node.py)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np


class PlannerGraph:
    """A probe node (a state publisher; ``on_chunk`` gets every ``planner/chunk``) and a
    single-threaded executor. :meth:`start` adds the planner node, :meth:`close` tears the
    graph down (the planner node only when it was started).

    Args:
        ctx: The test's rclpy context.
        on_chunk: Called with each ``JointTrajectory`` chunk the probe receives.
    """

    def __init__(self, ctx: Any, on_chunk: Callable[[Any], None]) -> None:
        import rclpy
        from edgerl_ros.common import CHUNK_QOS, STATE_QOS, TOPICS
        from rclpy.executors import SingleThreadedExecutor
        from sensor_msgs.msg import JointState
        from trajectory_msgs.msg import JointTrajectory

        self.probe = rclpy.create_node("probe", context=ctx)
        self.probe.create_subscription(JointTrajectory, TOPICS["chunk"], on_chunk, CHUNK_QOS)
        self.state_pub = self.probe.create_publisher(JointState, TOPICS["state"], STATE_QOS)
        self.ex = SingleThreadedExecutor(context=ctx)
        self.node: Any = None

    def start(self, node: Any) -> None:
        """Spin ``node`` (the planner) and the probe on the executor."""
        self.node = node
        self.ex.add_node(node)
        self.ex.add_node(self.probe)

    def spin_states(self, spec: Any, seconds: float,
                    until: Callable[[], bool] = lambda: False) -> None:
        """For ``seconds`` (or until ``until()``): publish a zero state stamped now (``spec``'s
        observation names), then spin three times for up to 3 ms each."""
        from edgerl_ros.messages import make_joint_state

        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end and not until():
            self.state_pub.publish(make_joint_state(spec.observation.names,
                                                    np.zeros(spec.observation.dim),
                                                    time.time_ns()))
            for _ in range(3):
                self.ex.spin_once(timeout_sec=0.003)

    def close(self) -> None:
        if self.node is not None:
            self.node.shutdown()
            self.node.destroy_node()
        self.ex.shutdown()
        self.probe.destroy_node()
