"""Composition: the sim robot and the edit node in one process, linked by calls
(``edgerl_ros.composition``, ``edgerl_ros.container``, ``edgerl deploy --compose``)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from edgerl_ros.session import SpinThread

from edgerl.apps.cli import main

pytestmark = pytest.mark.ros


def test_name_index_reorders_and_names_the_mismatch():
    from edgerl_ros.composition import CompositionError, _index

    assert _index(["a", "b"], ["a", "b"], "action") is None  # same order: no copy
    assert _index(["b", "a", "c"], ["a", "b", "c"], "observation").tolist() == [1, 0, 2]
    with pytest.raises(CompositionError, match=r"observation names differ.*\['z'\].*\['c'\]"):
        _index(["a", "b", "z"], ["a", "b", "c"], "observation")


def test_compose_refused_for_a_robot_it_cannot_host(session_bundle, capsys):
    rc = main(["deploy", "--bundle", str(session_bundle), "--robot", "ros2_control",
               "--compose"])
    assert rc == 1  # a usage error (CliError), before anything starts
    err = capsys.readouterr().err
    assert "--compose runs the edit node inside the robot's process" in err
    assert "--robot sim or serial, not ros2_control" in err


def test_container_refuses_an_unknown_robot_node():
    from edgerl_ros.container import Composition

    with pytest.raises(ValueError, match="cannot compose 'planner_node': choose one of "
                                         "sim_robot_node, serial_bridge_node"):
        Composition("planner_node")


@pytest.fixture
def composed(rclpy_context, session_bundle):
    """(robot, edit node, link): both nodes in this process, the link attached, spinning."""
    pytest.importorskip("torch")
    from edgerl_ros.composition import ComposedLink
    from edgerl_ros.edit_policy_node import EditPolicyNode
    from edgerl_ros.sim_robot_node import SimRobotNode
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.parameter import Parameter

    edit = EditPolicyNode(context=rclpy_context, parameter_overrides=[
        Parameter("bundle", value=str(session_bundle)), Parameter("trigger", value="state"),
        Parameter("state_source", value="in_process"), Parameter("rt_priority", value=0)])
    assert edit.trigger_configure() == TransitionCallbackReturn.SUCCESS
    edit.trigger_activate()
    robot = SimRobotNode(context=rclpy_context, parameter_overrides=[
        Parameter("publish_expert", value=False)])
    link = ComposedLink(robot, edit)
    link.attach()
    spin = SpinThread(rclpy_context, edit, robot, timeout_s=0.02)

    def quiesce() -> None:
        """Stop the robot's stepping and the executor: no callback or tick after this."""
        robot._stop.set()
        robot._thread.join(5)
        spin.stop()

    try:
        yield robot, edit, link, quiesce
    finally:
        link.detach()
        quiesce()
        robot.shutdown()
        edit.shutdown()
        robot.destroy_node()
        edit.destroy_node()


def test_link_ticks_the_edit_node_in_the_robot_thread(composed):
    """Each state ticks the edit node once, in the stepping thread, and its command reaches
    the robot by call: e2e (state stamp -> command applied) is the tick, not a transport."""
    robot, edit, link, quiesce = composed
    t_end = time.monotonic() + 20.0
    while robot.steps.count < 100 and time.monotonic() < t_end:
        time.sleep(0.05)
    assert robot.steps.count >= 100, "the robot did not step on the edit node's commands"
    quiesce()  # freeze the counters
    assert edit.states_received == link.states > 100
    assert edit._inline is not None and edit._inline.ticks_on_state == link.states
    assert edit.episode_resets == link.episodes
    # one command per state; the robot applied each once (its own topic copy is ignored)
    assert link.commands >= link.states - 1
    # (a fallback tick before the first state sends an unstamped command: refused)
    assert robot.commands_received + robot.drops.total == link.commands
    assert set(robot.drops.by_key()) <= {"robot/command no_stamp"}
    assert robot.latency.count + robot.commands_repeat_state == robot.commands_received
    e2e = robot.latency.values()
    assert np.median(e2e) < 2e-3, np.median(e2e)  # the tick; across processes: 1-2 ms
    age = edit.state_age.percentile(50)
    assert age < 0.5e-3, age  # stamp -> tick in the same thread (across processes: >= 0.5 ms)


def test_link_refuses_an_edit_node_listening_to_the_topic(rclpy_context, session_bundle):
    from edgerl_ros.composition import ComposedLink, CompositionError
    from edgerl_ros.edit_policy_node import EditPolicyNode
    from rclpy.parameter import Parameter

    edit = EditPolicyNode(context=rclpy_context, parameter_overrides=[
        Parameter("bundle", value=str(session_bundle))])
    try:
        with pytest.raises(CompositionError, match="not configured"):
            ComposedLink(object(), edit)
        edit.trigger_configure()
        with pytest.raises(CompositionError, match="state_source must be 'in_process'"):
            ComposedLink(object(), edit)
    finally:
        edit.shutdown()
        edit.destroy_node()


@pytest.mark.slow
def test_deploy_compose_runs_one_container_and_stops_it(session_bundle, ros_domain, capsys):
    from test_deploy import _processes_mentioning

    rc = main(["deploy", "--bundle", str(session_bundle), "--robot", "sim", "--duration", "5",
               "--trigger", "state", "--compose", "--json", "--min-success", "0",
               "--domain-id", str(ros_domain)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    # the robot and the edit node share a process (torch: the sim); the planner is alone
    assert out["torch_loaded"] == {"robot_edit_container": True, "planner_node": False}
    assert abs(out["cmd_rate_hz"] - 50.0) / 50.0 < 0.05, out["cmd_rate_hz"]
    assert out["diagnostics_sources"] == ["edgerl: edit_policy_node", "edgerl: planner_node",
                                          "edgerl: sim_robot_node"]
    assert out["edit_trigger"] == "state" and out["edit_inline_tick"] is True
    robot = out["robot"]
    # each command applied once: its topic copy is not applied a second time
    assert int(robot["commands_received"]) <= 1.05 * int(robot["steps"]) + 5
    assert out["edit_state_age_at_tick_p50_ms"] < 0.5  # no transport before the tick
    assert out["e2e_latency_p50_us"] < 2000
    assert not _processes_mentioning("edgerl_ros.container")


def test_robot_command_subscription_skips_in_process_commands(rclpy_context):
    """A composed edit node marks the commands it already handed over in process
    (``IN_PROCESS_FRAME``); robot nodes subscribe through ``subscribe_commands``, whose DDS
    content filter drops them before rclpy's executor wakes (each wake cost the composed sim
    robot ~1 ms of GIL: 200 Hz became 110-180 Hz). Other commands still arrive, and an
    observer without the filter still sees the marked ones."""
    import rclpy
    from edgerl_ros.common import COMMAND_QOS, TOPICS
    from edgerl_ros.composition import IN_PROCESS_FRAME, in_process_command, subscribe_commands
    from edgerl_ros.messages import make_joint_state
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    node = rclpy.create_node("cmd_filter_test", context=rclpy_context)
    robot_got: list[str] = []
    observer_got: list[str] = []
    sub = subscribe_commands(node, lambda msg, info: robot_got.append(msg.header.frame_id),
                             COMMAND_QOS)
    node.create_subscription(JointState, TOPICS["command"],
                             lambda msg: observer_got.append(msg.header.frame_id), COMMAND_QOS)
    pub = node.create_publisher(JointState, TOPICS["command"], COMMAND_QOS)
    ex = SingleThreadedExecutor(context=rclpy_context)
    ex.add_node(node)
    try:
        assert sub.is_cft_enabled  # Fast DDS filters content
        for i in range(6):  # one at a time: the command QoS keeps only the newest
            pub.publish(make_joint_state(["a"], np.zeros(1), 1, "effort",
                                         IN_PROCESS_FRAME if i % 2 else ""))
            t_end = time.monotonic() + 5.0
            while len(observer_got) <= i and time.monotonic() < t_end:
                ex.spin_once(timeout_sec=0.05)
            for _ in range(3):  # the robot's copy, if any, is in by now
                ex.spin_once(timeout_sec=0.01)
        assert observer_got.count(IN_PROCESS_FRAME) == 3 and observer_got.count("") == 3
        assert robot_got == ["", "", ""]
        marked = make_joint_state(["a"], np.zeros(1), 1, "effort", IN_PROCESS_FRAME)
        assert in_process_command(marked) and not in_process_command(JointState())
    finally:
        ex.shutdown()
        node.destroy_node()
