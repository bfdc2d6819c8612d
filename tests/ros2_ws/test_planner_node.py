"""planner_node's planners (ONNX chunk planner, sim expert) and the publishing buffer."""

from __future__ import annotations

import time

import numpy as np
import pytest
from edgerl_ros.planner_node import (
    DelayedPlanner,
    ExpertTopicPlanner,
    OnnxChunkPlanner,
    PublishingBuffer,
    fit_horizon,
)

from edgerl.chunk import ActionChunk
from edgerl.planner import Planner, PlannerHealth
from edgerl.spec import PolicySpec


def test_fit_horizon_cuts_or_holds_last_row():
    rows = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(fit_horizon(rows, 2), rows[:2])
    out = fit_horizon(rows, 5)
    assert out.shape == (5, 2)
    np.testing.assert_array_equal(out[3:], [[4, 5], [4, 5]])


def test_onnx_planner_matches_the_network(make_bundle_with_planner):
    import onnxruntime as ort

    bundle = make_bundle_with_planner
    spec = PolicySpec.load(bundle)
    planner = OnnxChunkPlanner(bundle / "planner.onnx", spec)
    assert isinstance(planner, Planner)
    obs = np.linspace(-1, 1, spec.observation.dim).astype(np.float32)
    chunk = planner.plan(obs, "", now=12.5)
    assert chunk.actions.shape == (spec.chunk.horizon, spec.action.dim)
    assert chunk.t0 == chunk.obs_time == 12.5 and chunk.dt == spec.chunk.dt_s
    sess = ort.InferenceSession(str(bundle / "planner.onnx"), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {sess.get_inputs()[0].name: obs[None]})[0].reshape(chunk.actions.shape)
    np.testing.assert_allclose(chunk.actions, ref, rtol=1e-6)


def test_expert_planner_serves_newest_chunk_fitted_to_horizon(session_bundle):
    spec = PolicySpec.load(session_bundle)
    planner = ExpertTopicPlanner(spec)
    assert planner.health() == PlannerHealth.STARTING
    with pytest.raises(RuntimeError, match="no expert chunk"):
        planner.plan(np.zeros(4, np.float32), "", 0.0)
    planner.offer(ActionChunk(np.full((3, 1), 0.5), t0=7.0, dt=spec.chunk.dt_s, obs_time=7.0))
    chunk = planner.plan(np.zeros(4, np.float32), "", 99.0)
    assert chunk.horizon == spec.chunk.horizon and chunk.obs_time == 7.0
    assert np.all(chunk.actions == np.float32(0.5))
    assert planner.health() == PlannerHealth.OK


def test_delayed_planner_and_publishing_buffer(session_bundle):
    spec = PolicySpec.load(session_bundle)
    inner = ExpertTopicPlanner(spec)
    inner.offer(ActionChunk(np.zeros((10, 1)), t0=1.0, dt=0.02, obs_time=1.0))
    slow = DelayedPlanner(inner, 0.05)
    t0 = time.perf_counter()
    chunk = slow.plan(np.zeros(4, np.float32), "", 1.0)
    assert time.perf_counter() - t0 >= 0.05
    sent = []
    buf = PublishingBuffer(sent.append, action_dim=1)
    buf.push(chunk, now=1.0)
    assert sent == [chunk] and buf.latest() is chunk and buf.pushes == 1


class _EchoPlanner:
    """A planner whose chunk rows are ``obs[0] + i`` and which records the instruction."""

    def __init__(self, horizon: int, action_dim: int, dt: float) -> None:
        from edgerl.planner import PlannerInfo

        self.info = PlannerInfo(horizon=horizon, action_dim=action_dim, dt_s=dt, period_s=0.05,
                                expected_latency_s=0.001)
        self.instructions: list[str] = []

    def plan(self, observation, instruction, now):
        self.instructions.append(instruction)
        rows = observation[0] + np.arange(self.info.horizon, dtype=np.float32)[:, None]
        return ActionChunk(np.repeat(rows, self.info.action_dim, axis=1), t0=now,
                           dt=self.info.dt_s, obs_time=now)

    def health(self):
        return PlannerHealth.OK


@pytest.mark.ros
def test_remote_mode_over_a_planner_server(rclpy_context, make_bundle_with_planner):
    """planner_node (mode remote) -> `serve-planner`'s PlannerServer: the newest state goes
    out with the instruction; chunks come back stamped with that state and are published."""
    import rclpy
    from edgerl_ros.common import CHUNK_QOS, INSTRUCTION_QOS, STATE_QOS, TOPICS
    from edgerl_ros.messages import make_joint_state, stamp_to_ns
    from edgerl_ros.planner_node import PlannerNode
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    from edgerl.runtime.planner_server import PlannerServer, ServerConfig

    bundle = make_bundle_with_planner
    spec = PolicySpec.load(bundle)
    echo = _EchoPlanner(spec.chunk.horizon, spec.action.dim, spec.chunk.dt_s)
    server = PlannerServer(echo, ServerConfig(port=0))
    _, port = server.start()
    node = None
    probe = rclpy.create_node("probe", context=rclpy_context)
    chunks: list[JointTrajectory] = []
    probe.create_subscription(JointTrajectory, TOPICS["chunk"], chunks.append, CHUNK_QOS)
    state_pub = probe.create_publisher(type(make_joint_state([], np.zeros(0), 1)),
                                       TOPICS["state"], STATE_QOS)
    instr_pub = probe.create_publisher(String, TOPICS["instruction"], INSTRUCTION_QOS)
    ex = SingleThreadedExecutor(context=rclpy_context)
    try:
        node = PlannerNode(context=rclpy_context, parameter_overrides=[
            Parameter("bundle", value=str(bundle)), Parameter("mode", value="remote"),
            Parameter("remote_port", value=int(port))])
        ex.add_node(node)
        ex.add_node(probe)
        instr_pub.publish(String(data="push the red block"))
        sent = {}
        t_end = time.monotonic() + 3.0
        while time.monotonic() < t_end and len(chunks) < 10:
            obs = np.full(spec.observation.dim, float(len(sent)))
            msg = make_joint_state(spec.observation.names, obs, time.time_ns())
            sent[stamp_to_ns(msg.header.stamp)] = obs[0]
            state_pub.publish(msg)
            for _ in range(4):
                ex.spin_once(timeout_sec=0.005)
        assert len(chunks) >= 5, len(chunks)
        last = chunks[-1]
        stamp = stamp_to_ns(last.header.stamp)
        assert stamp in sent  # stamped with the state it was planned from
        assert last.points[0].positions[0] == pytest.approx(sent[stamp])
        assert last.points[3].positions[0] == pytest.approx(sent[stamp] + 3)
        assert len(last.points) == spec.chunk.horizon
        assert "push the red block" in echo.instructions
        assert node.values()["mode"] == "remote" and node.values()["errors"] == 0
    finally:
        if node is not None:
            node.shutdown()
            node.destroy_node()
        ex.shutdown()
        probe.destroy_node()
        server.stop()
