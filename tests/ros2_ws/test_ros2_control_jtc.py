"""The ros2_control bridge against a JointTrajectoryController that applies ros2_controllers'
acceptance rules (:mod:`tests.helpers.fake_jtc`): (a) the fake's rules on hand-made
messages, (b) every trajectory the bridge sends at 50 Hz under CPU load is accepted, (c) the
stops it sends on command silence and at shutdown are accepted stops. Real rclpy."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from tests.helpers.bundles import write_mlp_bundle
from tests.helpers.fake_jtc import FakeJointTrajectoryController

pytestmark = pytest.mark.ros

MAP = "o0=slider:position, o1=slider:velocity, o2=hinge:position, o3=hinge:velocity"
HOLD = {"hinge": 0.2, "slider": 1.5}  # the joints' positions on /joint_states


@pytest.fixture
def bundle(tmp_path):
    """An edit bundle with observations o0..o3 and one action a0 (the slider's command)."""
    return write_mlp_bundle(tmp_path / "bundle", obs_dim=4, action_dim=1, control_hz=50.0,
                            hidden=(16,))


def _point(t_ns=20_000_000, **fields):
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectoryPoint

    return JointTrajectoryPoint(time_from_start=Duration(sec=int(t_ns // 10**9),
                                                         nanosec=int(t_ns % 10**9)), **fields)


def _traj(names, points, stamp_ns=0):
    from edgerl_ros.messages import ns_to_stamp
    from trajectory_msgs.msg import JointTrajectory

    msg = JointTrajectory(joint_names=list(names), points=list(points))
    msg.header.stamp = ns_to_stamp(stamp_ns)
    return msg


@pytest.fixture
def fake_node(rclpy_context):
    import rclpy

    node = rclpy.create_node("fake_controller_manager", context=rclpy_context)
    yield node
    node.destroy_node()


J2 = ["slider", "hinge"]


def _good(**fields):
    return _traj(J2, [_point(positions=[1.0, 2.0], **fields)])


class TestFakeRules:
    """Each of validate_trajectory_msg's rules rejects what it should; good messages pass."""

    def test_good_messages_pass(self, fake_node):
        effort = FakeJointTrajectoryController(fake_node, J2, ("effort",))
        position = FakeJointTrajectoryController(fake_node, J2, ("position",), name="pos")
        assert effort.validate(_good(effort=[0.5, 0.0])) is None
        assert position.validate(_good(velocities=[0.0, 0.0], accelerations=[0.0, 0.0])) \
            is None
        # joint order is free; several points with increasing times; a future end
        now = effort.now_ns()
        msg = _traj(["hinge", "slider"], [_point(10**7, positions=[0.0, 0.0]),
                                          _point(2 * 10**7, positions=[1.0, 1.0])],
                    stamp_ns=now - 10**6)
        assert effort.validate(msg) is None and position.validate(msg) is None

    @pytest.mark.parametrize("msg_fn,key", [
        (lambda: _traj(["slider"], [_point(positions=[1.0])]), "joint_count"),
        (lambda: _traj([], [_point(positions=[])]), "joint_count"),
        (lambda: _traj(J2, []), "empty_points"),
        (lambda: _traj(["slider", "wheel"], [_point(positions=[1.0, 2.0])]), "unknown_joint"),
        (lambda: _traj(["slider", "slider"], [_point(positions=[1.0, 2.0])]),
         "duplicate_joint"),
        (lambda: _good(velocities=[0.0, 0.1]), "nonzero_end_velocity"),
        (lambda: _traj(J2, [_point(positions=[1.0, 2.0])], stamp_ns=time.time_ns() - 10**9),
         "past_end"),
        (lambda: _traj(J2, [_point(2 * 10**7, positions=[0.0, 0.0]),
                            _point(2 * 10**7, positions=[1.0, 1.0])]), "not_increasing"),
        (lambda: _traj(J2, [_point(2 * 10**7, positions=[0.0, 0.0]),
                            _point(10**7, positions=[1.0, 1.0])]), "not_increasing"),
        (lambda: _traj(J2, [_point(effort=[0.5, 0.5])]), "field_size"),  # no positions
        (lambda: _traj(J2, [_point(positions=[1.0])]), "field_size"),
        (lambda: _good(velocities=[0.0]), "field_size"),
        (lambda: _good(accelerations=[0.0, 0.0, 0.0]), "field_size"),
    ])
    def test_each_rule_rejects(self, fake_node, msg_fn, key):
        fake = FakeJointTrajectoryController(fake_node, J2, ("effort",))
        reason = fake.validate(msg_fn())
        assert reason is not None and reason.startswith(key + ":"), reason

    def test_effort_only_with_an_effort_interface(self, fake_node):
        position = FakeJointTrajectoryController(fake_node, J2, ("position",))
        reason = position.validate(_good(effort=[0.5, 0.5]))
        assert reason is not None and reason.startswith("effort_not_allowed:"), reason
        # an effort of the wrong size is left to the controller's interpolation (no rule)
        effort = FakeJointTrajectoryController(fake_node, J2, ("effort",), name="e")
        assert effort.validate(_good(effort=[0.5, 0.5])) is None

    def test_the_zero_stamp_starts_now_and_a_future_end_passes(self, fake_node):
        fake = FakeJointTrajectoryController(fake_node, J2)
        now = fake.now_ns()
        old = _traj(J2, [_point(10**8, positions=[1.0, 2.0])], stamp_ns=now - 2 * 10**8)
        assert fake.validate(old).startswith("past_end:")
        assert fake.validate(old, now_ns=now - 2 * 10**8) is None  # not yet ended then
        assert fake.validate(_traj(J2, [_point(0, positions=[1.0, 2.0])])) is None

    def test_options_relax_the_rules(self, fake_node):
        fake = FakeJointTrajectoryController(
            fake_node, J2, ("position",), allow_partial_joints_goal=True,
            allow_integration_in_goal_trajectories=True,
            allow_nonzero_velocity_at_trajectory_end=True)
        assert fake.validate(_traj(["hinge"], [_point(velocities=[0.3])])) is None
        reason = fake.validate(_traj(["hinge"], [_point(effort=[])]))
        assert reason.startswith("no_motion_fields:"), reason

    def test_stops_hold_the_current_positions(self, fake_node):
        effort = FakeJointTrajectoryController(fake_node, J2, ("effort",))
        position = FakeJointTrajectoryController(fake_node, J2, ("position",), name="p")
        for fake in (effort, position):
            fake.set_positions({"slider": 1.0, "hinge": 2.0})
        hold = _traj(J2, [_point(0, positions=[1.0, 2.0])])
        assert position.is_stop(hold) and not effort.is_stop(hold)  # effort: none given
        assert effort.is_stop(_good(effort=[0.0, 0.0]))
        assert not effort.is_stop(_good(effort=[0.0, 0.1]))
        assert not position.is_stop(_traj(J2, [_point(positions=[1.0, 2.5])]))
        assert not position.is_stop(_traj(J2, []))


def _busy_children(n=2):
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def _wait(pred, timeout=5.0):
    t_end = time.monotonic() + timeout
    while time.monotonic() < t_end:
        if pred():
            return True
        time.sleep(0.02)
    return bool(pred())


def _settle(count, timeout=5.0):
    """Wait until ``count()`` stops changing for 0.3 s."""
    t_end = time.monotonic() + timeout
    last = count()
    while time.monotonic() < t_end:
        time.sleep(0.3)
        now = count()
        if now == last:
            return now
        last = now
    return last


RATE_HZ, SECONDS = 50.0, 4.0


@pytest.mark.slow
@pytest.mark.parametrize("interface", ["effort", "position"])
def test_every_trajectory_under_load_and_every_stop_is_accepted(rclpy_context, bundle,
                                                                interface):
    """50 Hz of commands from ``edit_policy_node`` (stamped with the state they answer) for
    4 s while two busy processes load the CPU: the controller accepts every trajectory the
    bridge sends; on command silence and at shutdown it receives a stop it accepts."""
    import rclpy
    from edgerl_ros.common import STATE_QOS, TOPICS
    from edgerl_ros.messages import make_joint_state, ns_to_stamp
    from edgerl_ros.ros2_control_bridge_node import Ros2ControlBridgeNode
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    bridge = Ros2ControlBridgeNode(context=rclpy_context, parameter_overrides=[
        Parameter("bundle", value=str(bundle)), Parameter("observation_map", value=MAP),
        Parameter("command_joints", value="slider"),
        Parameter("command_interface", value="trajectory"),
        Parameter("command_field", value=interface),
        Parameter("trajectory_time_s", value=0.02),
        Parameter("command_timeout_s", value=0.3)])
    robot = rclpy.create_node("fake_controller_manager", context=rclpy_context)
    jtc = FakeJointTrajectoryController(robot, ["slider"], (interface,))
    jtc.set_positions(HOLD)
    js_pub = robot.create_publisher(JointState, "/joint_states", 10)
    # plays the edit node: the bridge takes robot/command from edit_policy_node only
    edge = rclpy.create_node("edit_policy_node", context=rclpy_context)
    cmd_pub = edge.create_publisher(JointState, TOPICS["command"], STATE_QOS)
    names = list(HOLD)

    def tick(k):
        """One control period: a state stamped now, then the command answering it."""
        stamp = time.time_ns()
        js = JointState(name=names, position=[HOLD[n] for n in names],
                        velocity=[0.1 * np.sin(k / 10.0), 0.0], effort=[0.0, 0.0])
        js.header.stamp = ns_to_stamp(stamp)
        js_pub.publish(js)
        value = 0.1 + 0.05 * (k % 5)  # never zero: a command is never a stop
        cmd_pub.publish(make_joint_state(["a0"], np.array([value]), stamp, field=interface))
        return value

    load = []
    from edgerl_ros.session import SpinThread

    spin = SpinThread(rclpy_context, bridge, robot, edge, timeout_s=0.02)
    try:
        # discovery before the timed run: states reach the bridge, and the command and
        # trajectory topics are matched
        def ready():
            js = JointState(name=names, position=[HOLD[n] for n in names],
                            velocity=[0.0, 0.0], effort=[0.0, 0.0])
            js.header.stamp = ns_to_stamp(time.time_ns())
            js_pub.publish(js)
            return (bridge.states > 0 and edge.count_subscribers(TOPICS["command"]) > 0
                    and robot.count_publishers(jtc.topic) > 0)

        assert _wait(ready, timeout=10.0)
        assert jtc.counts() == {"accepted": 0, "rejected": 0, "stops": 0}
        load = _busy_children(2)
        period, t0, k, sent = 1.0 / RATE_HZ, time.monotonic(), 0, None
        while k < RATE_HZ * SECONDS:
            sent = tick(k)
            k += 1
            time.sleep(max(0.0, t0 + k * period - time.monotonic()))
        # command silence: one stop after command_timeout_s, accepted as a stop
        assert _wait(lambda: jtc.stops, timeout=5.0), (jtc.counts(), jtc.rejected[-1:])
        forwarded = _settle(lambda: len(jtc.accepted) + len(jtc.rejected))
        values = bridge.values()
        assert jtc.rejected == [], jtc.rejected[0][0]
        assert values["stops_sent"] == 1 and len(jtc.stops) == 1
        # every trajectory sent was accepted (counted on both sides), and nearly all ticks
        assert values["commands_forwarded"] + values["stops_sent"] == forwarded \
            == len(jtc.accepted), (values, jtc.counts())
        assert values["commands_forwarded"] > 0.9 * RATE_HZ * SECONDS, values
        assert jtc.stops[-1] is jtc.accepted[-1]
        last_command = jtc.accepted[-2].points[-1]
        field = "effort" if interface == "effort" else "positions"
        assert list(getattr(last_command, field)) == pytest.approx([sent])
    finally:
        for p in load:
            p.kill()
            p.wait(5)
    try:
        # commands resume, then the bridge shuts down: a second accepted stop
        n = len(jtc.accepted)
        bridge.command_timeout_s = 30.0  # the next stop is the shutdown's
        tick(0)
        assert _wait(lambda: len(jtc.accepted) > n), jtc.counts()
        assert not jtc.is_stop(jtc.accepted[-1]) and len(jtc.stops) == 1
    finally:
        spin.executor.remove_node(bridge)  # the controller's node keeps spinning to receive it
        bridge.destroy_node()
        got_stop = _wait(lambda: len(jtc.stops) == 2)
        spin.stop()
        for node in (robot, edge):
            node.destroy_node()
    assert got_stop and bridge.stops == 2 and jtc.rejected == [], (jtc.counts(),
                                                                   jtc.rejected[-1:])
