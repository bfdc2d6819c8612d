"""The in-process edit node graph the ROS tests drive: an ``EditPolicyNode`` on the cartpole
test bundle beside a probe node that plays robot and planner (publishes states and chunks,
records commands and diagnostics), spun by one executor thread (the ``graph`` fixture:
tests/ros2_ws/conftest.py)."""

from __future__ import annotations

import time

import numpy as np

OBS = ["cart_x", "cart_vel", "pole_angle", "pole_vel"]


class Probe:
    """A second node in the same context: plays robot + planner, records commands/diags."""

    def __init__(self, ctx, names=OBS):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from edgerl_ros.common import CHUNK_QOS, DIAG_QOS, STATE_QOS, TOPICS
        from edgerl_ros.messages import TimeBase
        from sensor_msgs.msg import JointState
        from trajectory_msgs.msg import JointTrajectory

        self.node = rclpy.create_node("probe", context=ctx)
        self.tb = TimeBase()
        self.state_pub = self.node.create_publisher(JointState, TOPICS["state"], STATE_QOS)
        self.chunk_pub = self.node.create_publisher(JointTrajectory, TOPICS["chunk"], CHUNK_QOS)
        self.commands, self.diags, self.sent_stamps = [], [], set()
        self.node.create_subscription(JointState, TOPICS["command"],
                                      lambda m: self.commands.append((time.perf_counter(), m)),
                                      STATE_QOS)
        self.node.create_subscription(DiagnosticArray, TOPICS["diagnostics"],
                                      self.diags.append, DIAG_QOS)

    def publish_state(self, values=None, names=OBS):
        from edgerl_ros.messages import make_joint_state, stamp_to_ns

        msg = make_joint_state(names, np.zeros(len(names)) if values is None else values,
                               time.time_ns())
        self.sent_stamps.add(stamp_to_ns(msg.header.stamp))
        self.state_pub.publish(msg)

    def publish_chunk(self, value=0.1, horizon=10, dt=0.02):
        from edgerl_ros.messages import chunk_to_trajectory

        from edgerl.contract.chunk import ActionChunk

        now = time.perf_counter()
        chunk = ActionChunk(np.full((horizon, 1), value), t0=now, dt=dt, obs_time=now)
        self.chunk_pub.publish(chunk_to_trajectory(chunk, ["cart_force"], self.tb))


def drive(probe, seconds, rate=50.0, bad=None):
    """Publish good states (and a fresh chunk every 5th tick) at ``rate`` for ``seconds``;
    ``bad(i)`` may publish a malformed message at step i."""
    t_end = time.perf_counter() + seconds
    i = 0
    while time.perf_counter() < t_end:
        probe.publish_state(np.array([0.0, 0.0, 0.01 * (i % 7), 0.0]))
        if i % 5 == 0:
            probe.publish_chunk()
        if bad is not None:
            bad(i)
        i += 1
        time.sleep(1.0 / rate)


def entities(node):
    return ({p.topic_name for p in node.publishers}, {s.topic_name for s in node.subscriptions},
            len(list(node.timers)))


def wait_for(cond, timeout=5.0):
    t_end = time.monotonic() + timeout
    while not cond() and time.monotonic() < t_end:
        time.sleep(0.005)
    return cond()
