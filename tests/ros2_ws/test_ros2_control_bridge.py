"""ros2_control interop: observation names <- (joint, field) of a standard ``/joint_states``;
commands -> a forward_command_controller (``Float64MultiArray``) or a JointTrajectoryController
(``JointTrajectory``). Real rclpy; the stand-ins publish and subscribe the exact message types
and topic names ros2_control uses. No torch needed (the Python 3.10 runtime CI job runs it)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.helpers.bundles import write_mlp_bundle

pytestmark = pytest.mark.ros

OBS = ["o0", "o1", "o2", "o3"]  # a cart-pole: cart x, cart velocity, pole angle, pole velocity
MAP = "o0=slider:position, o1=slider:velocity, o2=hinge:position, o3=hinge:velocity"


@pytest.fixture
def bundle(tmp_path):
    """An edit bundle with observations o0..o3 and one action a0 (the slider's force)."""
    return write_mlp_bundle(tmp_path / "bundle", obs_dim=4, action_dim=1, control_hz=50.0,
                            hidden=(16,))


def _joint_states(names, pos, vel, stamp_ns=1_700_000_000_123_456_789):
    from edgerl_ros.messages import ns_to_stamp
    from sensor_msgs.msg import JointState

    msg = JointState()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.name, msg.position, msg.velocity = list(names), list(pos), list(vel)
    msg.effort = [0.0] * len(names)
    return msg


class TestCommandMapping:
    def test_the_trajectory_field_follows_the_command_field(self):
        from edgerl_ros.ros2_control_bridge_node import trajectory_field_for

        assert trajectory_field_for("effort") == "effort"
        assert trajectory_field_for("position") == "positions"
        assert trajectory_field_for("velocity") == "velocities"
        assert trajectory_field_for("effort", "accelerations") == "accelerations"

    def test_command_scale_per_action_or_one_for_all(self):
        from edgerl_ros.ros2_control_bridge_node import parse_scale

        np.testing.assert_array_equal(parse_scale("", 2), [1.0, 1.0])
        np.testing.assert_array_equal(parse_scale("40", 2), [40.0, 40.0])
        np.testing.assert_array_equal(parse_scale("40, -2.5", 2), [40.0, -2.5])

    @pytest.mark.parametrize("text,needle", [("a,b", "not a comma-separated list"),
                                             ("0", "finite and non-zero"),
                                             ("inf", "finite and non-zero"),
                                             ("1,2,3", "3 factors for 2 actions")])
    def test_bad_scales_name_the_problem(self, text, needle):
        from edgerl_ros.ros2_control_bridge_node import parse_scale

        with pytest.raises(ValueError, match=needle):
            parse_scale(text, 2)


class TestObservationMap:
    def test_maps_joint_fields_in_observation_order(self):
        from edgerl_ros.ros2_control_bridge_node import parse_observation_map

        m = parse_observation_map(MAP, OBS)
        assert m.joints == ("slider", "slider", "hinge", "hinge")
        assert m.fields == ("position", "velocity", "position", "velocity")
        # a broadcaster publishes every joint, in its own order
        msg = _joint_states(["wheel", "hinge", "slider"], [9.0, 0.2, 1.5], [8.0, -0.3, 0.7])
        np.testing.assert_array_equal(m.observation(msg),
                                      np.array([1.5, 0.7, 0.2, -0.3], np.float32))

    @pytest.mark.parametrize("text,needle", [
        ("o0=slider:position", "no joint for o1, o2, o3"),
        (MAP + ", o0=slider:effort", "'o0' is mapped twice"),
        (MAP.replace("hinge:velocity", "hinge:accel"), "field 'accel' is not one of"),
        (MAP + ", goal=target:position", "'goal' is not an observation"),
        (MAP.replace("o0=slider:position", "o0 slider"), "expected obs_name=joint:field"),
    ])
    def test_bad_maps_name_the_problem(self, text, needle):
        from edgerl_ros.ros2_control_bridge_node import parse_observation_map

        with pytest.raises(ValueError, match=needle):
            parse_observation_map(text, OBS)

    def test_missing_joint_and_non_finite_are_bad_messages(self):
        from edgerl_ros.messages import BadMessage
        from edgerl_ros.ros2_control_bridge_node import parse_observation_map

        m = parse_observation_map(MAP, OBS)
        with pytest.raises(BadMessage, match="missing_joint: 'hinge'"):
            m.observation(_joint_states(["slider"], [0.0], [0.0]))
        with pytest.raises(BadMessage, match="non_finite: hinge.velocity"):
            m.observation(_joint_states(["slider", "hinge"], [0.0, 0.0], [0.0, float("nan")]))


def _wait(pred, timeout=10.0, publish=None):
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if publish is not None:
            publish()
        if pred():
            return True
        time.sleep(0.05)
    return False


def _stand_in_controller(node, interface: str, on_command) -> None:
    """Subscribe ``on_command`` as the controller does: a forward_command_controller's
    ``Float64MultiArray`` or a JointTrajectoryController's ``JointTrajectory``, with
    ros2_control's topic names and default QoS (reliable, depth 10)."""
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory

    if interface == "forward":
        node.create_subscription(Float64MultiArray, "/forward_command_controller/commands",
                                 on_command, 10)
    else:
        node.create_subscription(JointTrajectory, "/joint_trajectory_controller/joint_trajectory",
                                 on_command, 10)


@pytest.mark.parametrize("interface", ["forward", "trajectory"])
def test_bridge_between_joint_states_edgerl_and_a_controller(rclpy_context, bundle, interface):
    import rclpy
    from edgerl_ros.common import STATE_QOS, TOPICS
    from edgerl_ros.messages import make_joint_state, stamp_to_ns
    from edgerl_ros.ros2_control_bridge_node import Ros2ControlBridgeNode
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    bridge = Ros2ControlBridgeNode(context=rclpy_context, parameter_overrides=[
        Parameter("bundle", value=str(bundle)), Parameter("observation_map", value=MAP),
        Parameter("command_joints", value="slider"),
        Parameter("command_interface", value=interface),
        Parameter("trajectory_time_s", value=0.05),
        Parameter("command_scale", value="2.0" if interface == "forward" else ""),
        Parameter("command_timeout_s", value=30.0)])  # the stop has its own test
    # stand-ins: joint_state_broadcaster (publisher) and the controller (subscriber), with
    # ros2_control's topic names and default QoS (reliable, depth 10)
    robot = rclpy.create_node("stand_in_ros2_control", context=rclpy_context)
    js_pub = robot.create_publisher(JointState, "/joint_states", 10)
    got_cmd, got_state = [], []
    _stand_in_controller(robot, interface, got_cmd.append)
    # plays the edit node: the bridge takes robot/command from edit_policy_node only
    edge = rclpy.create_node("edit_policy_node", context=rclpy_context)
    edge.create_subscription(JointState, TOPICS["state"], got_state.append, STATE_QOS)
    cmd_pub = edge.create_publisher(JointState, TOPICS["command"], STATE_QOS)
    from edgerl_ros.session import SpinThread

    spin = SpinThread(rclpy_context, bridge, robot, edge, timeout_s=0.02)
    try:
        js = _joint_states(["hinge", "slider", "wheel"], [0.2, 1.5, 9.0], [-0.3, 0.7, 8.0])
        assert _wait(lambda: got_state, publish=lambda: js_pub.publish(js))
        st = got_state[-1]
        assert list(st.name) == OBS
        np.testing.assert_allclose(st.position, [1.5, 0.7, 0.2, -0.3], rtol=1e-6)
        assert stamp_to_ns(st.header.stamp) == stamp_to_ns(js.header.stamp)

        def fresh(value=0.25):  # stamped now: the state it answers is fresh
            return make_joint_state(["a0"], np.array([value]), time.time_ns(), field="effort")

        assert _wait(lambda: got_cmd, publish=lambda: cmd_pub.publish(fresh()))
        out = got_cmd[-1]
        if interface == "forward":
            assert list(out.data) == [0.5]  # command_scale 2: the controller's units
        else:
            assert list(out.joint_names) == ["slider"] and len(out.points) == 1
            # an effort command goes in effort, never as positions: the point carries the
            # joint's measured position (a JointTrajectoryController rejects a point without
            # positions; tests/helpers/fake_jtc.py); stamped zero (start on receipt), so a
            # loaded graph never sends a trajectory that starts in the past
            assert list(out.points[0].effort) == [0.25] and list(out.points[0].positions) == [1.5]
            assert stamp_to_ns(out.header.stamp) == 0
            assert out.points[0].time_from_start.nanosec == 50_000_000
        # a command with wrong names is dropped and counted, not forwarded (once the
        # commands still queued from the wait above are through)
        n = -1
        while n != len(got_cmd):
            n = len(got_cmd)
            time.sleep(0.2)
        cmd_pub.publish(make_joint_state(["bogus"], np.array([1.0]), 124, field="effort"))
        assert _wait(lambda: bridge.drops.total >= 1, timeout=5.0)
        assert len(got_cmd) == n and bridge.values()["commands_forwarded"] >= 1
        # commands 10 s old, zero-stamped or with effort 1e6: refused, counted
        for bad in (make_joint_state(["a0"], np.array([0.5]), time.time_ns() - 10**10,
                                     field="effort"),
                    make_joint_state(["a0"], np.array([0.5]), 0, field="effort"),
                    fresh(1e6)):
            total = bridge.drops.total  # one at a time: the command QoS keeps only the last
            assert _wait(lambda total=total: bridge.drops.total > total, timeout=5.0,
                         publish=lambda bad=bad: cmd_pub.publish(bad)), bridge.drops.by_key()
        kinds = ("robot/command stale", "robot/command no_stamp",
                 "robot/command out_of_limits")
        assert all(bridge.drops.by_key().get(k) for k in kinds), bridge.drops.by_key()
        assert len(got_cmd) == n
        assert bridge.values()["dropped robot/command out_of_limits"] >= 1
        # a fresh, valid command from another node: refused as foreign, never forwarded
        intruder = rclpy.create_node("intruder", context=rclpy_context)
        foreign_pub = intruder.create_publisher(JointState, TOPICS["command"], STATE_QOS)
        assert _wait(lambda: bridge.drops.by_key().get("robot/command foreign"), timeout=5.0,
                     publish=lambda: foreign_pub.publish(fresh(0.3)))
        assert len(got_cmd) == n
        intruder.destroy_node()
    finally:
        spin.stop()
        for node in (bridge, robot, edge):
            node.destroy_node()


@pytest.mark.parametrize("interface", ["forward", "trajectory"])
def test_the_controller_gets_a_stop_when_commands_stop_and_at_shutdown(rclpy_context, bundle,
                                                                       interface):
    """A forward_command_controller applies its last command forever: when the commands stop
    (the edit node died) the bridge sends one stop, and another at shutdown after a command
    resumed; a JointTrajectoryController gets an empty trajectory (cancel and hold)."""
    import rclpy
    from edgerl_ros.common import STATE_QOS, TOPICS
    from edgerl_ros.messages import make_joint_state
    from edgerl_ros.ros2_control_bridge_node import Ros2ControlBridgeNode
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    bridge = Ros2ControlBridgeNode(context=rclpy_context, parameter_overrides=[
        Parameter("bundle", value=str(bundle)), Parameter("observation_map", value=MAP),
        Parameter("command_joints", value="slider"),
        Parameter("command_interface", value=interface),
        Parameter("command_timeout_s", value=0.2)])
    robot = rclpy.create_node("stand_in_controller", context=rclpy_context)
    got = []
    _stand_in_controller(robot, interface, got.append)
    # plays the edit node: the bridge takes robot/command from edit_policy_node only
    edge = rclpy.create_node("edit_policy_node", context=rclpy_context)
    cmd_pub = edge.create_publisher(JointState, TOPICS["command"], STATE_QOS)

    def is_stop(m) -> bool:  # trajectory: hold the measured position with zero effort
        if interface == "forward":
            return list(m.data) == [0.0]
        return len(m.points) == 1 and list(m.points[0].positions) == [1.5] \
            and list(m.points[0].effort) == [0.0]

    def fresh():
        return make_joint_state(["a0"], np.array([0.25]), time.time_ns(), field="effort")

    js_pub = robot.create_publisher(JointState, "/joint_states", 10)
    from edgerl_ros.session import SpinThread

    spin = SpinThread(rclpy_context, bridge, robot, edge, timeout_s=0.02)
    try:
        js = _joint_states(["hinge", "slider", "wheel"], [0.2, 1.5, 9.0], [-0.3, 0.7, 8.0])
        assert _wait(lambda: bridge.states, publish=lambda: js_pub.publish(js))
        time.sleep(0.5)
        assert got == [] and bridge.stops == 0  # no command yet: nothing to stop
        assert _wait(lambda: got, publish=lambda: cmd_pub.publish(fresh()))
        assert not is_stop(got[0])
        # the commands stop: one stop within the timeout (plus the timer's and the spin's
        # latency), and only one
        assert _wait(lambda: got and is_stop(got[-1]), timeout=5.0)
        time.sleep(0.5)
        assert sum(is_stop(m) for m in got) == 1 and bridge.values()["stops_sent"] == 1
        if interface == "trajectory":
            assert list(got[-1].joint_names) == ["slider"]
        # commands resume, then the bridge shuts down: another stop
        n = len(got)
        bridge.command_timeout_s = 30.0
        assert _wait(lambda: len(got) > n, publish=lambda: cmd_pub.publish(fresh()))
        assert not is_stop(got[-1])
    finally:
        spin.executor.remove_node(bridge)  # the controller's node keeps spinning to receive it
        bridge.destroy_node()
        deadline = time.monotonic() + 5.0
        while not (got and is_stop(got[-1])) and time.monotonic() < deadline:
            time.sleep(0.05)
        spin.stop()
        for node in (robot, edge):
            node.destroy_node()
    assert is_stop(got[-1]) and bridge.stops == 2


def test_command_joints_must_match_the_actions(rclpy_context, bundle):
    from edgerl_ros.ros2_control_bridge_node import Ros2ControlBridgeNode
    from rclpy.parameter import Parameter

    with pytest.raises(ValueError, match=r"command_joints: 2 joints .* for 1 actions"):
        Ros2ControlBridgeNode(context=rclpy_context, parameter_overrides=[
            Parameter("bundle", value=str(bundle)),
            Parameter("observation_map", value=MAP),
            Parameter("command_joints", value="slider, hinge")])
