"""The Foxglove live view (``edgerl deploy --foxglove PORT``): a real Foxglove WebSocket client
(``websockets``, subprotocol ``foxglove.sdk.v1``) subscribes to the JSON channels a
:class:`~edgerl_ros.foxglove_live.LiveView` serves from real rclpy topics, checks the payloads
against what a probe node published, and finds the port closed after ``stop()``."""

from __future__ import annotations

import contextlib
import json
import math
import socket
import struct
import sys
import threading
import time

import numpy as np
import pytest

from tests.helpers.edit_node_graph import OBS, Probe

pytestmark = pytest.mark.ros

SUBPROTOCOL = "foxglove.sdk.v1"  # what foxglove-sdk 0.30 speaks (foxglove.websocket.v1: 400)
MESSAGE_DATA = 0x01  # binary opcode: uint32 subscription id, uint64 log time, payload


class FoxgloveClient:
    """A minimal Foxglove WebSocket client: reads ``serverInfo`` and ``advertise``,
    subscribes by topic and decodes ``messageData`` frames."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.server_info: dict = {}
        self.channels: dict[str, dict] = {}  # topic -> advertised channel
        self.sub_topic: dict[int, str] = {}

    def read_advertisements(self, topics, timeout=5.0) -> None:
        t_end = time.monotonic() + timeout
        while not set(topics) <= set(self.channels) and time.monotonic() < t_end:
            msg = json.loads(self.ws.recv(timeout=max(0.01, t_end - time.monotonic())))
            if msg["op"] == "serverInfo":
                self.server_info = msg
            elif msg["op"] == "advertise":
                self.channels.update({c["topic"]: c for c in msg["channels"]})

    def subscribe(self, *topics: str) -> None:
        subs = []
        for topic in topics:
            sub_id = len(self.sub_topic) + 1
            self.sub_topic[sub_id] = topic
            subs.append({"id": sub_id, "channelId": self.channels[topic]["id"]})
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": subs}))

    def receive(self, timeout: float) -> tuple[str, int, dict] | None:
        """The next data frame as (topic, log time ns, JSON payload); ``None`` on timeout."""
        try:
            frame = self.ws.recv(timeout=timeout)
        except TimeoutError:
            return None
        if isinstance(frame, str):  # a control message (e.g. a later advertise)
            return None
        assert frame[0] == MESSAGE_DATA, frame[:16]
        sub_id, log_time = struct.unpack_from("<IQ", frame, 1)
        return self.sub_topic[sub_id], log_time, json.loads(frame[13:])


@contextlib.contextmanager
def foxglove_client(port: int):
    from websockets.sync.client import connect

    with connect(f"ws://127.0.0.1:{port}", subprotocols=[SUBPROTOCOL], open_timeout=5) as ws:
        yield FoxgloveClient(ws)


def _refused(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2.0)
        return s.connect_ex(("127.0.0.1", port)) != 0


def _threads_named(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name and t.is_alive()]


def test_live_view_serves_state_command_chunk_and_diagnostics(rclpy_context):
    pytest.importorskip("foxglove", reason="foxglove-sdk: pip install 'edgerl[live]'")
    pytest.importorskip("websockets")
    from diagnostic_msgs.msg import DiagnosticArray
    from edgerl_ros.common import COMMAND_QOS, DIAG_QOS, TOPICS, diag_status
    from edgerl_ros.foxglove_live import LiveConfig, LiveView
    from edgerl_ros.messages import make_joint_state
    from sensor_msgs.msg import JointState

    probe = Probe(rclpy_context)
    cmd_pub = probe.node.create_publisher(JointState, TOPICS["command"], COMMAND_QOS)
    diag_pub = probe.node.create_publisher(DiagnosticArray, TOPICS["diagnostics"], DIAG_QOS)
    live = LiveView(rclpy_context, LiveConfig(port=0, max_rate_hz=0), node_name="live_test")
    port = live.port
    try:
        assert port > 0 and live.url == f"ws://127.0.0.1:{port}"
        with foxglove_client(port) as client:
            assert client.ws.subprotocol == SUBPROTOCOL
            topics = ["/edgerl/state", "/edgerl/command", "/edgerl/chunk", "/edgerl/diagnostics"]
            client.read_advertisements(topics)
            assert client.server_info.get("name") == "edgerl"
            assert sorted(client.channels) == sorted(topics)
            for channel in client.channels.values():
                assert channel["encoding"] == "json", channel
                assert channel["schemaEncoding"] == "jsonschema", channel
                assert json.loads(channel["schema"])["type"] == "object", channel
            assert client.channels["/edgerl/command"]["schemaName"] == "edgerl.Command"
            client.subscribe("/edgerl/command", "/edgerl/state", "/edgerl/chunk",
                             "/edgerl/diagnostics")

            state = np.array([0.25, -1.5, 0.125, 3.0])
            command = [0.75]
            got: dict[str, tuple[int, dict]] = {}
            lag_ns = 30_000_000  # commands stamped 30 ms in the past
            t_end = time.monotonic() + 15.0
            i = 0
            while len(got) < 4 and time.monotonic() < t_end:
                # keep publishing until discovery has matched every subscription
                probe.publish_state(state)
                cmd_pub.publish(make_joint_state(["cart_force"], command,
                                                 time.time_ns() - lag_ns, field="effort"))
                if i % 5 == 0:
                    probe.publish_chunk(value=0.5, horizon=4, dt=0.02)
                    diag_pub.publish(DiagnosticArray(status=[diag_status(
                        "edgerl: probe", "probe", {"loop_hz": 49.5, "drops": 3})]))
                i += 1
                t_wait = time.monotonic() + 0.02
                while (remaining := t_wait - time.monotonic()) > 0:
                    frame = client.receive(remaining)
                    if frame is not None:
                        got.setdefault(frame[0], (frame[1], frame[2]))
            assert sorted(got) == sorted(topics), f"received {sorted(got)} of {topics}"

            log_time, st = got["/edgerl/state"]
            assert st["names"] == OBS and st["field"] == "position"
            assert st["values"] == state.tolist()
            assert st["stamp_ns"] in probe.sent_stamps
            assert abs(log_time - time.time_ns()) < 60e9  # receive time, ns since the epoch
            assert log_time >= st["stamp_ns"]

            log_time, cmd = got["/edgerl/command"]
            assert cmd["names"] == ["cart_force"] and cmd["values"] == command
            assert cmd["field"] == "effort"
            # receive time - header stamp: at least the 30 ms the stamp was set back by
            assert lag_ns / 1e6 <= cmd["e2e_latency_ms"] < lag_ns / 1e6 + 5000, cmd
            assert cmd["e2e_latency_ms"] == pytest.approx((log_time - cmd["stamp_ns"]) / 1e6)

            _, chunk = got["/edgerl/chunk"]
            assert chunk["names"] == ["cart_force"]
            assert chunk["rows"] == [[0.5]] * 4
            assert chunk["dt"] == pytest.approx(0.02, abs=1e-6)

            _, diag = got["/edgerl/diagnostics"]
            assert diag == {"edgerl: probe": {"loop_hz": "49.5", "drops": "3"}}
        assert live.published["/edgerl/command"] >= 1
    finally:
        live.stop()
        probe.node.destroy_node()
    # gone: the port refuses connections, the spin thread has ended, stop() is idempotent
    assert _refused(port)
    assert _threads_named("live_test") == []
    live.stop()


def test_live_view_publishes_nothing_unwatched_and_caps_the_rate(rclpy_context):
    pytest.importorskip("foxglove", reason="foxglove-sdk: pip install 'edgerl[live]'")
    pytest.importorskip("websockets")
    from edgerl_ros.foxglove_live import LiveConfig, LiveView

    probe = Probe(rclpy_context)
    live = LiveView(rclpy_context, LiveConfig(port=0, max_rate_hz=5.0))
    try:
        for _ in range(50):  # 1 s at 50 Hz with no client: nothing converted or sent
            probe.publish_state(np.zeros(4))
            time.sleep(0.02)
        assert live.published["/edgerl/state"] == 0
        with foxglove_client(live.port) as client:
            client.read_advertisements(["/edgerl/state"])
            client.subscribe("/edgerl/state")
            time.sleep(0.3)  # the subscription reaches the server
            frames = 0
            t_end = time.perf_counter() + 2.0
            while time.perf_counter() < t_end:
                probe.publish_state(np.zeros(4))
                deadline = time.monotonic() + 0.01  # ~100 Hz offered
                while (remaining := deadline - time.monotonic()) > 0:
                    if client.receive(remaining) is not None:
                        frames += 1
        # 5 Hz cap over ~2 s (+ the tail still in flight): far below the ~100 offered
        assert 3 <= frames <= 14, frames
        assert live.published["/edgerl/state"] <= 14
    finally:
        live.stop()
        probe.node.destroy_node()


def test_port_in_use_is_a_clear_error_and_leaves_nothing_running(rclpy_context):
    pytest.importorskip("foxglove", reason="foxglove-sdk: pip install 'edgerl[live]'")
    from edgerl_ros.foxglove_live import LiveConfig, LiveView, LiveViewError
    from edgerl_ros.graph_config import DeployError

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(LiveViewError, match=f"127.0.0.1:{port}") as err:
            LiveView(rclpy_context, LiveConfig(port=port), node_name="live_busy")
    assert isinstance(err.value, DeployError)  # `edgerl deploy` reports it, no traceback
    assert _threads_named("live_busy") == []


def test_missing_foxglove_sdk_names_the_extra(rclpy_context, monkeypatch):
    from edgerl_ros.foxglove_live import LiveConfig, LiveView, LiveViewError

    monkeypatch.setitem(sys.modules, "foxglove", None)  # import foxglove -> ImportError
    with pytest.raises(LiveViewError, match=r"pip install 'edgerl\[live\]'"):
        LiveView(rclpy_context, LiveConfig(port=0), node_name="live_missing")
    assert _threads_named("live_missing") == []


def test_payloads_turn_non_finite_values_into_null():
    from builtin_interfaces.msg import Duration
    from edgerl_ros.foxglove_live import chunk_payload, joint_state_payload
    from edgerl_ros.messages import make_joint_state
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    msg = make_joint_state(["a", "b"], [math.nan, 2.0], 1_000_000_000, field="velocity")
    out = joint_state_payload(msg, recv_ns=1_002_500_000)
    assert out == {"stamp_ns": 1_000_000_000, "names": ["a", "b"], "values": [None, 2.0],
                   "field": "velocity", "e2e_latency_ms": pytest.approx(2.5)}
    json.dumps(out, allow_nan=False)  # strict JSON, as Foxglove parses it
    unstamped = make_joint_state(["a"], [1.0], 0)
    assert joint_state_payload(unstamped, recv_ns=5)["e2e_latency_ms"] is None
    traj = JointTrajectory(joint_names=["u"], points=[
        JointTrajectoryPoint(positions=[math.inf], time_from_start=Duration(nanosec=10_000_000)),
        JointTrajectoryPoint(positions=[1.0], time_from_start=Duration(nanosec=35_000_000))])
    out = chunk_payload(traj)
    assert out["rows"] == [[None], [1.0]] and out["dt"] == pytest.approx(0.025)
    assert chunk_payload(JointTrajectory(joint_names=["u"]))["dt"] is None


def test_live_config_refuses_bad_values():
    from edgerl_ros.foxglove_live import LiveConfig, LiveViewError

    with pytest.raises(LiveViewError, match="port"):
        LiveConfig(port=70000)
    with pytest.raises(LiveViewError, match="max_rate_hz"):
        LiveConfig(max_rate_hz=-1.0)
    assert LiveConfig().host == "127.0.0.1"  # loopback unless asked


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_deploy_serves_the_running_graph_to_foxglove(session_bundle, ros_domain):
    """`deploy(foxglove=...)`: a client connected mid-run receives the edit node's commands
    and the sim robot's states; the server is gone once deploy returns."""
    pytest.importorskip("foxglove", reason="foxglove-sdk: pip install 'edgerl[live]'")
    pytest.importorskip("websockets")
    from edgerl_ros.foxglove_live import LiveConfig
    from edgerl_ros.graph import DeployConfig, deploy

    from edgerl.contract.spec import PolicySpec

    spec = PolicySpec.load(session_bundle)
    port = _free_port()
    got: dict[str, dict] = {}

    def watch(_frac: float) -> None:
        if got:
            return
        with foxglove_client(port) as client:
            client.read_advertisements(["/edgerl/state", "/edgerl/command"])
            client.subscribe("/edgerl/command", "/edgerl/state")
            t_end = time.monotonic() + 10.0
            while len(got) < 2 and time.monotonic() < t_end:
                frame = client.receive(0.5)
                if frame is not None:
                    got.setdefault(frame[0], frame[2])

    result = deploy(DeployConfig(bundle=session_bundle, robot="sim", duration_s=3.0,
                                 domain_id=ros_domain,
                                 foxglove=LiveConfig(port=port, max_rate_hz=0)),
                    on_progress=watch)
    assert result["commands"] > 0
    assert sorted(got) == ["/edgerl/command", "/edgerl/state"], sorted(got)
    assert got["/edgerl/command"]["names"] == list(spec.action.names)
    assert got["/edgerl/command"]["field"] == "effort"  # the edit node's command_field
    assert 0 < got["/edgerl/command"]["e2e_latency_ms"] < 1000, got["/edgerl/command"]
    assert got["/edgerl/state"]["names"] == list(spec.observation.names)
    assert len(got["/edgerl/state"]["values"]) == len(spec.observation.names)
    assert _refused(port)
    assert _threads_named("edgerl_live_view") == []


def test_deploy_cli_refuses_foxglove_flags_before_starting(session_bundle, monkeypatch,
                                                          capsys):
    import edgerl_ros.graph

    from edgerl.apps.cli import main

    started = []
    monkeypatch.setattr(edgerl_ros.graph, "deploy", lambda *a, **k: started.append(a))
    argv = ["deploy", "--bundle", str(session_bundle), "--duration", "1"]
    assert main([*argv, "--foxglove", "70000"]) == 1
    assert "--foxglove must be a port in 1..65535" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "foxglove", None)  # foxglove-sdk not installed
    assert main([*argv, "--foxglove", "8765"]) == 1
    assert "pip install 'edgerl[live]'" in capsys.readouterr().err
    assert started == []


def test_deploy_without_foxglove_sdk_fails_before_the_graph_starts(session_bundle,
                                                                   ros_domain, monkeypatch):
    from edgerl_ros.foxglove_live import LiveConfig
    from edgerl_ros.graph import DeployConfig, DeployError, GraphProcesses, deploy

    started = []
    monkeypatch.setattr(GraphProcesses, "start", lambda *a, **k: started.append(a))
    monkeypatch.setitem(sys.modules, "foxglove", None)
    with pytest.raises(DeployError, match=r"pip install 'edgerl\[live\]'"):
        deploy(DeployConfig(bundle=session_bundle, duration_s=1.0, domain_id=ros_domain,
                            foxglove=LiveConfig(port=0)))
    assert started == []
