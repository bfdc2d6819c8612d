"""serial_bridge_node against the compiled host firmware on a pty (real pyserial, real rclpy):
plant state in via the firmware's sensor HAL -> JointState out; JointState commands ->
SETPOINTs the firmware applies (read back from its actuator output)."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.ros, pytest.mark.hil]

FW = Path(__file__).resolve().parents[2] / "firmware" / "build" / "edgerl_fw_host"
OBS = ["cart_x", "cart_vel", "pole_angle", "pole_vel"]
STATE = [0.1, -0.2, 0.05, 0.3]


@pytest.fixture
def firmware():
    """(process, pty path, actuator commands seen) with a plant feeding SENSOR frames."""
    if not FW.is_file():
        pytest.skip(f"{FW} not built (make firmware)")
    from edgerl.contract.wire import FrameParser, decode, encode

    proc = subprocess.Popen([str(FW), "--plant-stdio", "--n-cmd", "1"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stop = threading.Event()
    actuator: list[tuple[int, list[float]]] = []
    try:
        line = proc.stdout.readline().decode().split()
        assert line[0] == "EDGERL_FW_PTY", line
        pty = line[1]

        def feed():
            seq = 0
            while not stop.is_set():
                state = STATE + [0.0] * 12
                try:
                    proc.stdin.write(encode("SENSOR", seq & 0xFFFF, plant_time_us=seq * 10000,
                                            n=4, state=state))
                    proc.stdin.flush()
                except (BrokenPipeError, ValueError):
                    return
                seq += 1
                stop.wait(0.01)

        def read_actuator():
            parser = FrameParser()
            while not stop.is_set():
                data = proc.stdout.read1(4096)
                if not data:
                    return
                for frame in parser.feed(data):
                    msg = decode(frame)
                    if msg is not None and msg.name == "ACTUATOR":
                        actuator.append((msg.fields["mode"],
                                         list(msg.fields["cmd"][:msg.fields["n"]])))

        threads = [threading.Thread(target=f, daemon=True) for f in (feed, read_actuator)]
        for t in threads:
            t.start()
        yield proc, pty, actuator
    finally:
        stop.set()
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_bridge_states_out_commands_in(firmware, rclpy_context, session_bundle):
    from edgerl_ros.common import COMMAND_QOS, STATE_QOS, TOPICS
    from edgerl_ros.messages import make_joint_state
    from edgerl_ros.serial_bridge_node import SerialBridgeNode
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    _, pty, actuator = firmware
    t_node = time.monotonic()
    node = SerialBridgeNode(context=rclpy_context, parameter_overrides=[
        Parameter("port", value=pty), Parameter("bundle", value=str(session_bundle))])
    import rclpy

    # plays the edit node: the bridge executes robot/command from edit_policy_node only
    probe = rclpy.create_node("edit_policy_node", context=rclpy_context)
    states: list[JointState] = []
    probe.create_subscription(JointState, TOPICS["state"], states.append, STATE_QOS)
    cmd_pub = probe.create_publisher(JointState, TOPICS["command"], COMMAND_QOS)
    ex = SingleThreadedExecutor(context=rclpy_context)
    ex.add_node(node)
    ex.add_node(probe)
    try:
        t_end = time.monotonic() + 2.0
        i = 0
        while time.monotonic() < t_end:
            names = ["cart_force"] if i % 10 else ["bogus"]  # every 10th command is bad
            cmd_pub.publish(make_joint_state(names, np.array([0.3]), time.time_ns(), "effort"))
            i += 1
            deadline = time.monotonic() + 0.02
            while time.monotonic() < deadline:
                ex.spin_once(timeout_sec=0.005)
        alive_s = time.monotonic() - t_node
        assert len(states) >= 30, len(states)
        # one JointState per sensor sample (fed at most every 10 ms), none for the firmware's
        # echo of each setpoint, which repeats the newest sample (published too, they gave
        # ~150 states/s here and a state-triggered edit node one more command per echo)
        assert node.states_published <= alive_s / 0.01 + 3, (node.states_published, alive_s)
        last = states[-1]
        assert list(last.name) == OBS
        np.testing.assert_allclose(last.position, STATE, atol=1e-6)
        stats = node.transport.stats()
        assert stats.connected and stats.setpoints_acked >= 30
        assert node.states_repeated >= 0.8 * stats.setpoints_acked  # the echoes, not published
        assert stats.bad_frames == 0
        assert node.drops.by_key().get("robot/command unknown_joint", 0) >= 5
        applied = [cmd for mode, cmd in actuator if mode == 1]  # Mode.ACTIVE
        assert applied and applied[-1][0] == pytest.approx(0.3)
    finally:
        node.shutdown()
        ex.shutdown()
        node.destroy_node()
        probe.destroy_node()
    assert not node.transport.connected


def test_bridge_refuses_stale_unstamped_and_out_of_limit_commands(firmware, rclpy_context,
                                                                  session_bundle):
    """No setpoint goes out for a command 10 s old, zero-stamped or with effort 1e6."""
    import rclpy
    from edgerl_ros.common import COMMAND_QOS, TOPICS
    from edgerl_ros.messages import make_joint_state
    from edgerl_ros.serial_bridge_node import SerialBridgeNode
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    _, pty, actuator = firmware
    node = SerialBridgeNode(context=rclpy_context, parameter_overrides=[
        Parameter("port", value=pty), Parameter("bundle", value=str(session_bundle))])
    probe = rclpy.create_node("edit_policy_node", context=rclpy_context)  # plays the edit node
    cmd_pub = probe.create_publisher(JointState, TOPICS["command"], COMMAND_QOS)
    ex = SingleThreadedExecutor(context=rclpy_context)
    ex.add_node(node)
    ex.add_node(probe)
    bad = {"stale": lambda: make_joint_state(["cart_force"], [0.3], time.time_ns() - 10**10,
                                             "effort"),
           "no_stamp": lambda: make_joint_state(["cart_force"], [0.3], 0, "effort"),
           "out_of_limits": lambda: make_joint_state(["cart_force"], [1e6], time.time_ns(),
                                                     "effort")}
    try:
        for kind, fn in bad.items():
            key = f"robot/command {kind}"
            t_end = time.monotonic() + 5.0
            while time.monotonic() < t_end and not node.drops.by_key().get(key):
                cmd_pub.publish(fn())
                ex.spin_once(timeout_sec=0.02)
            assert node.drops.by_key().get(key), (kind, node.drops.by_key())
        assert node.transport.stats().setpoints_sent == 0  # none reached the firmware
        assert not [cmd for mode, cmd in actuator if mode == 1]
        res = node.set_parameters([Parameter("baudrate", value=9600)])[0]
        assert not res.successful and "baudrate" in res.reason
    finally:
        node.shutdown()
        ex.shutdown()
        node.destroy_node()
        probe.destroy_node()


def test_only_the_edit_node_commands_and_only_the_operator_clears_the_estop(
        firmware, rclpy_context, session_bundle, tmp_path):
    """Another node's commands never reach the firmware (``foreign``); anyone may latch the
    e-stop (``robot/estop`` true), but ``robot/estop`` false and an unsigned or wrongly signed
    ``robot/estop_reset`` are refused and the firmware stays in ESTOP; the operator's signed
    re-arm clears it and the edit node's commands drive the actuator again."""
    import rclpy
    from edgerl_ros.common import CHUNK_QOS, COMMAND_QOS, TOPICS
    from edgerl_ros.messages import make_joint_state, ns_to_stamp
    from edgerl_ros.operator import OperatorPublisher
    from edgerl_ros.serial_bridge_node import ESTOP_TOPIC, SerialBridgeNode
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Bool, Header

    from edgerl.contract.operator_auth import OperatorKey

    _, pty, actuator = firmware
    key = OperatorKey.generate("bench")
    node = SerialBridgeNode(context=rclpy_context, parameter_overrides=[
        Parameter("port", value=pty), Parameter("bundle", value=str(session_bundle)),
        Parameter("operator_key_file", value=str(key.save(tmp_path / "op.key")))])
    edit = rclpy.create_node("edit_policy_node", context=rclpy_context)
    intruder = rclpy.create_node("intruder", context=rclpy_context)
    edit_pub = edit.create_publisher(JointState, TOPICS["command"], COMMAND_QOS)
    foreign_pub = intruder.create_publisher(JointState, TOPICS["command"], COMMAND_QOS)
    estop_pub = intruder.create_publisher(Bool, ESTOP_TOPIC, 10)
    reset_pub = intruder.create_publisher(Header, TOPICS["estop_reset"], CHUNK_QOS)
    operator = OperatorPublisher(edit, key)
    forger = OperatorPublisher(intruder, OperatorKey.generate("bench"))
    ex = SingleThreadedExecutor(context=rclpy_context)
    for n in (node, edit, intruder):
        ex.add_node(n)

    def spin(seconds, edit_value=None, foreign_value=None):
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            if edit_value is not None:
                edit_pub.publish(make_joint_state(["cart_force"], [edit_value], time.time_ns(),
                                                  "effort"))
            if foreign_value is not None:
                foreign_pub.publish(make_joint_state(["cart_force"], [foreign_value],
                                                     time.time_ns(), "effort"))
            deadline = time.monotonic() + 0.02
            while time.monotonic() < deadline:
                ex.spin_once(timeout_sec=0.005)

    def until(cond, seconds=5.0, **kw):
        t_end = time.monotonic() + seconds
        while not cond() and time.monotonic() < t_end:
            spin(0.05, **kw)
        return cond()

    def modes_since(n):
        return {mode for mode, _ in actuator[n:]}

    try:
        assert until(lambda: [c for m, c in actuator if m == 1], edit_value=0.3,
                     foreign_value=0.9), node.drops.by_key()
        spin(0.5, edit_value=0.3, foreign_value=0.9)
        assert node.drops.by_key().get("robot/command foreign", 0) >= 10
        assert all(c[0] == pytest.approx(0.3) for m, c in actuator if m == 1)  # never 0.9
        assert until(lambda: (estop_pub.publish(Bool(data=True)), node.estops_requested)[1])
        assert until(lambda: actuator and actuator[-1][0] == 3, edit_value=0.3)  # ESTOP
        estop_pub.publish(Bool(data=False))
        unsigned = Header()
        unsigned.stamp = ns_to_stamp(time.time_ns())
        reset_pub.publish(unsigned)
        forger.rearm()
        n = len(actuator)
        assert until(lambda: node.drops.by_key().get("robot/estop clear_refused")
                     and node.drops.by_key().get("robot/estop_reset unsigned")
                     and node.drops.by_key().get("robot/estop_reset bad_signature"),
                     edit_value=0.3)
        spin(0.3, edit_value=0.3)
        assert modes_since(n) == {3} and node.estop_clears == 0
        operator.rearm()
        assert until(lambda: node.estop_clears == 1)
        n = len(actuator)
        assert until(lambda: 1 in modes_since(n), edit_value=0.2)
        vals = node.values()
        assert vals["operator_accepted"] == 1 and vals["operator_refused unsigned"] == 1
    finally:
        node.shutdown()
        ex.shutdown()
        for n in (node, edit, intruder):
            n.destroy_node()
