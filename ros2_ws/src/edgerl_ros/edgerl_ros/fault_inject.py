"""``BadMessageInjector``: malformed inputs published into a running graph (``edgerl deploy
--inject-bad-hz``), to prove the nodes drop, count and report them."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

__all__ = ["BadMessageInjector"]


class BadMessageInjector:
    """Publishes malformed state and chunk messages (wrong length, NaN, unknown names,
    decreasing times) in rotation, to prove they are dropped, counted and reported."""

    def __init__(self, node: Any, obs_names: list[str], action_names: list[str]) -> None:
        from sensor_msgs.msg import JointState
        from trajectory_msgs.msg import JointTrajectory

        from edgerl_ros.common import CHUNK_QOS, STATE_QOS, TOPICS

        self.state_pub = node.create_publisher(JointState, TOPICS["state"], STATE_QOS)
        self.chunk_pub = node.create_publisher(JointTrajectory, TOPICS["chunk"], CHUNK_QOS)
        self.obs_names, self.action_names = obs_names, action_names
        self.sent = 0

    def send_one(self) -> None:
        from builtin_interfaces.msg import Duration
        from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

        from edgerl_ros.messages import make_joint_state, ns_to_stamp

        kind = self.sent % 4
        now = time.time_ns()
        n = len(self.obs_names)
        if kind == 0:  # wrong length
            msg = make_joint_state(self.obs_names, np.zeros(n + 1), now)
            self.state_pub.publish(msg)
        elif kind == 1:  # NaN
            vals = np.zeros(n)
            vals[0] = np.nan
            self.state_pub.publish(make_joint_state(self.obs_names, vals, now))
        elif kind == 2:  # unknown joint names
            names = [f"bogus_{i}" for i in range(n)]
            self.state_pub.publish(make_joint_state(names, np.zeros(n), now))
        else:  # chunk with decreasing times
            msg = JointTrajectory()
            msg.header.stamp = ns_to_stamp(now)
            msg.joint_names = list(self.action_names)
            for t in (0.02, 0.01, 0.03):
                pt = JointTrajectoryPoint()
                pt.positions = [0.0] * len(self.action_names)
                pt.time_from_start = Duration(sec=0, nanosec=int(t * 1e9))
                msg.points.append(pt)
            self.chunk_pub.publish(msg)
        self.sent += 1
