"""ros2_control bridge: observations from topics other than ``/joint_states``
(``Float64MultiArray`` by index, ``PointStamped`` / ``PoseStamped`` fields) and command limits
from the robot description (URDF ``<limit>``, ``command_scale: urdf``). The parsers and the
scaling on their own, then the bridge with real rclpy and stand-in publishers and controller
subscribers using the message types ros2_control uses."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.helpers.bundles import write_mlp_bundle

pytestmark = pytest.mark.ros

OBS = ["o0", "o1", "o2", "o3"]
# o1 and o3 are not joints: a goal (array element 1) and a target point's z
MAP = ("o0=slider:position, o1=/goal:Float64MultiArray[1], o2=hinge:position, "
       "o3=/target:geometry_msgs/PointStamped.point.z")
JS_STAMP = 1_700_000_000_123_456_789

URDF = """<?xml version="1.0"?>
<robot name="cartpole">
  <link name="rail"/><link name="cart"/><link name="pole"/>
  <joint name="slider" type="prismatic">
    <parent link="rail"/><child link="cart"/>
    <limit effort="40" velocity="2.5" lower="-0.5" upper="1.5"/>
  </joint>
  <joint name="hinge" type="continuous">
    <parent link="cart"/><child link="pole"/>
    <limit effort="3" velocity="8"/>
  </joint>
  <joint name="fixed_mount" type="fixed"><parent link="rail"/><child link="cart"/></joint>
</robot>
"""


@pytest.fixture
def bundle(tmp_path):
    """An edit bundle with observations o0..o3 and one action a0 in [-1, 1]."""
    return write_mlp_bundle(tmp_path / "bundle", obs_dim=4, action_dim=1, control_hz=50.0,
                            hidden=(16,))


def _joint_states(stamp_ns=JS_STAMP):
    from edgerl_ros.messages import ns_to_stamp
    from sensor_msgs.msg import JointState

    msg = JointState(name=["hinge", "slider"], position=[0.2, 1.5], velocity=[-0.3, 0.7],
                     effort=[0.0, 0.0])
    msg.header.stamp = ns_to_stamp(stamp_ns)
    return msg


def _goal(values=(9.0, 4.0, 7.0)):
    from std_msgs.msg import Float64MultiArray

    return Float64MultiArray(data=list(values))


def _target(z=-2.5):
    from geometry_msgs.msg import PointStamped

    msg = PointStamped()
    msg.point.x, msg.point.y, msg.point.z = 1.0, 2.0, z
    return msg


class TestTopicSources:
    def test_the_map_composes_joints_and_topic_elements_in_observation_order(self):
        from edgerl_ros.ros2_control_maps import AuxValues, parse_observation_map

        m = parse_observation_map(MAP, OBS)
        assert m.joints == ("slider", "", "hinge", "")
        assert [(k, t.spec) for k, t in m.elements()] == [
            (1, "/goal:Float64MultiArray[1]"), (3, "/target:PointStamped.point.z")]
        aux = AuxValues(m.elements(), max_age_s=1.0)
        assert aux.topics() == {"/goal": "Float64MultiArray", "/target": "PointStamped"}
        aux.update("/goal", _goal(), now_s=10.0)
        aux.update("/target", _target(), now_s=10.5)
        np.testing.assert_array_equal(m.observation(_joint_states(), aux.values(11.0)),
                                      np.array([1.5, 4.0, 0.2, -2.5], np.float32))

    def test_pose_stamped_fields(self):
        from edgerl_ros.ros2_control_maps import parse_observation_map
        from geometry_msgs.msg import PoseStamped

        m = parse_observation_map("a=/p:PoseStamped.pose.position.y, "
                                  "b=/p:PoseStamped.pose.orientation.w", ["a", "b"])
        pose = PoseStamped()
        pose.pose.position.y, pose.pose.orientation.w = 3.25, 0.5
        assert [t.read(pose) for _, t in m.elements()] == [3.25, 0.5]

    def test_waiting_for_then_stale_by_topic(self):
        from edgerl_ros.messages import BadMessage
        from edgerl_ros.ros2_control_maps import AuxValues, parse_observation_map

        aux = AuxValues(parse_observation_map(MAP, OBS).elements(), max_age_s=0.5)
        with pytest.raises(BadMessage, match="waiting_for /goal"):
            aux.values(1.0)
        aux.update("/goal", _goal(), now_s=1.0)
        with pytest.raises(BadMessage, match="waiting_for /target"):
            aux.values(1.0)
        aux.update("/target", _target(), now_s=1.2)
        assert aux.values(1.5) == {1: 4.0, 3: -2.5}
        with pytest.raises(BadMessage, match=r"stale /goal: last message 0.6 s ago"):
            aux.values(1.6)
        aux.update("/goal", _goal(), now_s=1.6)
        with pytest.raises(BadMessage, match="stale /target"):
            aux.values(1.75)

    def test_a_bad_message_keeps_the_previous_values(self):
        from edgerl_ros.messages import BadMessage
        from edgerl_ros.ros2_control_maps import AuxValues, parse_observation_map

        aux = AuxValues(parse_observation_map(MAP, OBS).elements())
        aux.update("/goal", _goal(), now_s=1.0)
        with pytest.raises(BadMessage, match=r"short: /goal has 1 values, .*\[1\] needs 2"):
            aux.update("/goal", _goal([5.0]), now_s=2.0)
        with pytest.raises(BadMessage, match="non_finite: /goal:Float64MultiArray"):
            aux.update("/goal", _goal([5.0, float("inf")]), now_s=2.0)
        assert aux.latest == {1: 4.0} and aux.received_s == {"/goal": 1.0}

    @pytest.mark.parametrize("entry,needle", [
        ("o1=/goal:Float32MultiArray[0]", "unknown type 'Float32MultiArray'"),
        ("o1=/goal:sensor_msgs/PointStamped.point.x", "unknown type 'sensor_msgs/PointStamped'"),
        ("o1=/goal:Float64MultiArray[-1]", r"bad index '\[-1\]'"),
        ("o1=/goal:Float64MultiArray[x]", r"bad index '\[x\]'"),
        ("o1=/goal:Float64MultiArray", "bad index ''"),
        ("o1=/goal:PointStamped.point.w", r"field '.point.w' of PointStamped is not one of"),
        ("o1=/goal:PoseStamped", "field '' of PoseStamped is not one of"),
        ("o1=/goal", "expected obs_name=/topic:Type"),
        ("o1=/goal:PointStamped.point.x, o1=/goal:PointStamped.point.y", "'o1' is mapped twice"),
        ("o1=/goal:PointStamped.point.x, o3=/goal:Float64MultiArray[0]",
         "topic /goal given as PointStamped and Float64MultiArray"),
    ])
    def test_bad_specs_name_the_problem(self, entry, needle):
        from edgerl_ros.ros2_control_maps import parse_observation_map

        text = "o0=slider:position, o2=hinge:position, o3=hinge:velocity, " + entry
        if entry.count("=") == 2:  # entries for o1 and o3: drop the joint o3
            text = text.replace("o3=hinge:velocity, ", "")
        with pytest.raises(ValueError, match=needle):
            parse_observation_map(text, OBS)


class TestUrdfLimits:
    def _scale(self, kind, joints=("slider",), urdf=URDF, **kw):
        from edgerl_ros.ros2_control_limits import command_scale

        return command_scale("urdf", list(joints), kind, [-1.0] * len(joints),
                             [1.0] * len(joints), urdf, **kw)

    def test_effort_and_velocity_map_onto_plus_minus_the_limit(self):
        assert self._scale("effort").apply([0.5]) == [20.0]  # 0.5 of 40 N
        assert self._scale("effort", ("slider", "hinge")).apply([-1.0, 0.5]) == [-40.0, 1.5]
        assert self._scale("velocities").apply([1.0]) == [2.5]

    def test_position_maps_onto_lower_upper(self):
        s = self._scale("positions")
        np.testing.assert_allclose(s.apply([-1.0]), [-0.5])
        np.testing.assert_allclose(s.apply([0.0]), [0.5])
        np.testing.assert_allclose(s.apply([0.5]), [1.0])

    def test_the_action_range_comes_from_the_bundle(self):
        from edgerl_ros.ros2_control_limits import command_scale

        s = command_scale("urdf", ["slider"], "effort", [0.0], [2.0], URDF)
        assert s.apply([0.0]) == [-40.0] and s.apply([1.5]) == [20.0]

    def test_from_a_file(self, tmp_path):
        (tmp_path / "robot.urdf").write_text(URDF)
        s = self._scale("effort", urdf="", description_file=str(tmp_path / "robot.urdf"))
        assert s.apply([0.25]) == [10.0]

    def test_numeric_factors_still_work(self):
        from edgerl_ros.ros2_control_limits import command_scale

        assert command_scale("2.0", ["slider"], "effort", [-1.0], [1.0]).apply([0.25]) == [0.5]
        assert command_scale("", ["slider"], "effort", [-1.0], [1.0]).apply([0.25]) == [0.25]

    @pytest.mark.parametrize("kind,joints,urdf,needle", [
        ("effort", ("wheel",), URDF, "joint 'wheel' .* is not in the URDF"),
        ("positions", ("hinge",), URDF, r"joint 'hinge' has no <limit lower=...>"),
        ("effort", ("fixed_mount",), URDF, r"joint 'fixed_mount' has no <limit effort=...>"),
        ("effort", ("slider",), URDF.replace('effort="40"', 'effort="lots"'),
         r"joint 'slider' <limit effort='lots'> is not a finite number"),
        ("positions", ("slider",), URDF.replace('upper="1.5"', 'upper="-0.5"'),
         r"joint 'slider' has an empty positions range \[-0.5, -0.5\]"),
        ("accelerations", ("slider",), URDF, "no limit for 'accelerations'"),
        ("effort", ("slider",), "<robot", "not valid XML"),
        ("effort", ("slider",), "", "needs robot_description"),
    ])
    def test_problems_name_the_joint_and_attribute(self, kind, joints, urdf, needle):
        with pytest.raises(ValueError, match=needle):
            self._scale(kind, joints, urdf)


def _wait(pred, timeout=10.0, publish=None):
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if publish is not None:
            publish()
        if pred():
            return True
        time.sleep(0.05)
    return False


def _bridge(ctx, bundle, **params):
    from edgerl_ros.ros2_control_bridge_node import Ros2ControlBridgeNode
    from rclpy.parameter import Parameter

    values = {"bundle": str(bundle), "observation_map": MAP, "command_joints": "slider",
              "command_timeout_s": 30.0, **params}
    return Ros2ControlBridgeNode(context=ctx, parameter_overrides=[
        Parameter(k, value=v) for k, v in values.items()])


def test_the_bridge_composes_topic_sources_and_drops_until_they_are_fresh(rclpy_context,
                                                                          bundle):
    import rclpy
    from edgerl_ros.common import STATE_QOS, TOPICS
    from edgerl_ros.messages import stamp_to_ns
    from geometry_msgs.msg import PointStamped
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray

    bridge = _bridge(rclpy_context, bundle, aux_max_age_s=0.3)
    robot = rclpy.create_node("stand_in_robot", context=rclpy_context)
    js_pub = robot.create_publisher(JointState, "/joint_states", 10)
    goal_pub = robot.create_publisher(Float64MultiArray, "/goal", 10)
    target_pub = robot.create_publisher(PointStamped, "/target", 10)
    got = []
    edge = rclpy.create_node("edit_policy_node", context=rclpy_context)
    edge.create_subscription(JointState, TOPICS["state"], got.append, STATE_QOS)
    from edgerl_ros.session import SpinThread

    spin = SpinThread(rclpy_context, bridge, robot, edge, timeout_s=0.02)
    drops = bridge.drops.by_key
    try:
        assert _wait(lambda: drops().get("/joint_states waiting_for /goal", 0) >= 3,
                     publish=lambda: js_pub.publish(_joint_states())), drops()
        assert got == [] and bridge.states == 0
        goal_pub.publish(_goal())
        assert _wait(lambda: drops().get("/joint_states waiting_for /target"),
                     publish=lambda: js_pub.publish(_joint_states())), drops()
        assert got == []

        def fresh_sources():
            goal_pub.publish(_goal())
            target_pub.publish(_target())
            js_pub.publish(_joint_states())

        assert _wait(lambda: got, publish=fresh_sources)
        st = got[-1]
        assert list(st.name) == OBS
        np.testing.assert_allclose(st.position, [1.5, 4.0, 0.2, -2.5], rtol=1e-6)
        assert stamp_to_ns(st.header.stamp) == JS_STAMP  # the joint state's stamp
        # the extra sources go quiet: after aux_max_age_s states drop as stale, none published
        time.sleep(0.4)
        n = bridge.states
        assert _wait(lambda: drops().get("/joint_states stale /goal", 0) >= 3,
                     publish=lambda: js_pub.publish(_joint_states())), drops()
        assert bridge.states == n
        assert bridge.values()["dropped /joint_states stale /goal"] >= 3
    finally:
        spin.stop()
        for node in (bridge, robot, edge):
            node.destroy_node()


@pytest.mark.parametrize("interface,field,action,expected", [
    ("forward", "effort", 0.5, 20.0),  # effort limit 40 N
    ("trajectory", "position", 0.5, 1.0),  # [-1, 1] -> [lower -0.5, upper 1.5]
])
def test_command_scale_urdf_reaches_the_controller(rclpy_context, bundle, interface, field,
                                                   action, expected):
    import rclpy
    from edgerl_ros.common import STATE_QOS, TOPICS
    from edgerl_ros.messages import make_joint_state
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory

    bridge = _bridge(rclpy_context, bundle, observation_map=MAP, command_interface=interface,
                     command_field=field, command_scale="urdf", robot_description=URDF)
    robot = rclpy.create_node("stand_in_controller", context=rclpy_context)
    got = []
    if interface == "forward":
        robot.create_subscription(Float64MultiArray, "/forward_command_controller/commands",
                                  lambda m: got.append(list(m.data)), 10)
    else:
        robot.create_subscription(JointTrajectory,
                                  "/joint_trajectory_controller/joint_trajectory",
                                  lambda m: got.append(list(m.points[0].positions)), 10)
    edge = rclpy.create_node("edit_policy_node", context=rclpy_context)
    cmd_pub = edge.create_publisher(JointState, TOPICS["command"], STATE_QOS)
    from edgerl_ros.session import SpinThread

    spin = SpinThread(rclpy_context, bridge, robot, edge, timeout_s=0.02)
    try:
        assert _wait(lambda: got, publish=lambda: cmd_pub.publish(make_joint_state(
            ["a0"], np.array([action]), time.time_ns(), field=field)))
        assert got[-1] == pytest.approx([expected])
    finally:
        spin.stop()
        for node in (bridge, robot, edge):
            node.destroy_node()


@pytest.mark.parametrize("params,needle", [
    ({"command_joints": "slider", "robot_description": URDF.replace('name="slider"',
                                                                    'name="rail_joint"')},
     "joint 'slider' .* is not in the URDF"),
    ({"command_joints": "hinge", "command_interface": "trajectory",
      "command_field": "position", "robot_description": URDF},
     "joint 'hinge' has no <limit lower=...>"),
    ({"observation_map": MAP.replace("[1]", "[one]")}, r"bad index '\[one\]'"),
])
def test_bad_sources_and_limits_fail_at_start(rclpy_context, bundle, params, needle):
    if "robot_description" in params:
        params = {"command_scale": "urdf", **params}
    with pytest.raises(ValueError, match=needle):
        _bridge(rclpy_context, bundle, **params)
