"""The edit node's operator channel over real rclpy: ``operator/intervention`` overrides the
commands it publishes until released; a record stamped an hour ahead is refused and counted."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.helpers.edit_node_graph import drive, wait_for

pytestmark = [pytest.mark.ros, pytest.mark.slow]  # 20-30 s on the loaded 2-core VM


def test_override_reaches_the_commands_and_release_ends_it(graph):
    from edgerl_ros.common import INTERVENTION_QOS, TOPICS
    from edgerl_ros.messages import make_joint_state
    from rclpy.lifecycle import TransitionCallbackReturn as R
    from sensor_msgs.msg import JointState

    node, probe = graph
    assert node.call(node.trigger_configure) == R.SUCCESS
    assert node.call(node.trigger_activate) == R.SUCCESS
    pub = probe.node.create_publisher(JointState, TOPICS["intervention"], INTERVENTION_QOS)
    drive(probe, 0.3)

    def send(kind, values=()):
        pub.publish(make_joint_state([kind], np.asarray(values, float), time.time_ns()))

    ahead = make_joint_state(["override"], np.array([0.5]), time.time_ns() + 3600 * 10**9)
    for _ in range(20):  # until discovery has happened and it was seen
        pub.publish(ahead)
        if wait_for(lambda: node.drops.by_key().get("operator/intervention future"), 0.2):
            break
    assert node.drops.by_key().get("operator/intervention future", 0) >= 1
    assert node.interventions_applied == 0 and not node.loop.interventions.active
    send("override", [-0.625])
    assert wait_for(lambda: node.loop.interventions.active)
    n = len(probe.commands)
    drive(probe, 0.3)
    overridden = [m.effort[0] for _, m in probe.commands[n:]]
    assert len(overridden) >= 5 and overridden[-1] == pytest.approx(-0.625)
    send("release")
    assert wait_for(lambda: not node.loop.interventions.active)
    n = len(probe.commands)
    drive(probe, 0.3)
    assert probe.commands[-1][1].effort[0] != pytest.approx(-0.625)
    assert node.interventions_applied == 2 and n > 0
