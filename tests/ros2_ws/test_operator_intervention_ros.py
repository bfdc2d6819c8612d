"""The edit node's operator channel over real rclpy: ``operator/intervention`` overrides the
commands it publishes until released; a record stamped an hour ahead is refused and counted."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.helpers.edit_node_graph import drive, wait_for

pytestmark = [pytest.mark.ros, pytest.mark.slow]  # 20-30 s on the loaded 2-core VM


def test_override_reaches_the_commands_and_release_ends_it(graph):
    """Signed with the operator key, an override drives the commands until released; an
    unsigned override from another node and a signed one stamped an hour ahead are refused
    and counted by reason."""
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
        probe.operator.intervene(kind, values)

    for _ in range(20):  # until discovery has happened and it was seen
        probe.operator.intervene("override", [0.5], time.time_ns() + 3600 * 10**9)
        if wait_for(lambda: node.drops.by_key().get("operator/intervention future"), 0.2):
            break
    assert node.drops.by_key().get("operator/intervention future", 0) >= 1
    pub.publish(make_joint_state(["override"], np.array([0.5]), time.time_ns()))
    assert wait_for(lambda: node.drops.by_key().get("operator/intervention unsigned"))
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


def test_any_node_may_stop_only_the_operator_may_release(graph):
    """An unsigned ``estop`` intervention from another node latches the e-stop (stopping is
    open to anyone); an unsigned re-arm is refused, the operator's signed one releases it."""
    from edgerl_ros.common import INTERVENTION_QOS, TOPICS
    from edgerl_ros.messages import make_joint_state, ns_to_stamp
    from rclpy.lifecycle import TransitionCallbackReturn as R
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Header

    node, probe = graph
    assert node.call(node.trigger_configure) == R.SUCCESS
    assert node.call(node.trigger_activate) == R.SUCCESS
    iv_pub = probe.node.create_publisher(JointState, TOPICS["intervention"], INTERVENTION_QOS)
    reset_pub = probe.node.create_publisher(Header, TOPICS["estop_reset"], INTERVENTION_QOS)
    for _ in range(50):  # until discovery has happened
        iv_pub.publish(make_joint_state(["estop"], np.zeros(0), time.time_ns()))
        if wait_for(lambda: node.loop.safety.estopped, 0.1):
            break
    assert node.loop.safety.estopped
    unsigned = Header()
    unsigned.stamp = ns_to_stamp(time.time_ns())
    reset_pub.publish(unsigned)
    assert wait_for(lambda: node.drops.by_key().get("robot/estop_reset unsigned"))
    assert node.loop.safety.estopped and node.estop_resets == 0
    probe.operator.rearm()
    assert wait_for(lambda: node.estop_resets == 1) and not node.loop.safety.estopped


def test_operator_console_verb_rearms_and_overrides(graph, operator_key_file, ros_domain,
                                                   capsys, tmp_path):
    """`edgerl operator rearm|override|release` with the key the node trusts reach the edit
    node; without a key a signed action is refused before anything is sent."""
    import json

    from rclpy.lifecycle import TransitionCallbackReturn as R

    from edgerl.apps.cli import main

    node, probe = graph
    assert node.call(node.trigger_configure) == R.SUCCESS
    assert node.call(node.trigger_activate) == R.SUCCESS
    node.loop.estop("test")
    base = ["--key", str(operator_key_file), "--domain-id", str(ros_domain), "--json"]
    assert main(["operator", "rearm", *base]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["receivers"] >= 1 and out["key_id"] == "test-operator"
    assert wait_for(lambda: node.estop_resets == 1) and not node.loop.safety.estopped
    assert main(["operator", "override", "--command", "-0.25", *base]) == 0
    assert wait_for(lambda: node.loop.interventions.active)
    assert main(["operator", "release", *base]) == 0
    assert wait_for(lambda: not node.loop.interventions.active)
    capsys.readouterr()
    key = tmp_path / "new.key"
    assert main(["operator", "keygen", "--key", str(key), "--key-id", "bench", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["key_id"] == "bench"
    assert main(["operator", "keygen", "--key", str(key)]) == 1  # exists: no overwrite
    assert "exists" in capsys.readouterr().err
    assert main(["operator", "override", *base]) == 1
    assert "--command" in capsys.readouterr().err
