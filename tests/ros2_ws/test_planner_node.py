"""planner_node's planners (ONNX chunk planner, sim expert) and the publishing buffer."""

from __future__ import annotations

import time

import numpy as np
import pytest
from edgerl_ros.planner_node import (
    ExpertTopicPlanner,
    PublishingBuffer,
    fit_horizon,
    onnx_chunk_planner,
)

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.planner import Planner, PlannerHealth
from edgerl.contract.spec import PolicySpec
from edgerl.runtime.planners.local.delayed import DelayedPlanner
from tests.helpers.planner_node_graph import PlannerGraph


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
    planner = onnx_chunk_planner(bundle / "planner.onnx", spec)
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

    # after an episode reset (planner_node sets reset_t), results planned before it are
    # neither published nor stored
    buf.reset_t = 2.0
    old_chunk = ActionChunk(np.ones((10, 1)), t0=1.5, dt=0.02, obs_time=1.5)
    buf.push(old_chunk, now=2.1)
    assert sent == [chunk] and buf.latest() is chunk and buf.dropped_pre_reset == 1
    new_chunk = ActionChunk(np.ones((10, 1)), t0=2.0, dt=0.02, obs_time=2.0)
    buf.push(new_chunk, now=2.1)
    assert sent == [chunk, new_chunk] and buf.latest() is new_chunk


class _EchoPlanner:
    """A planner whose chunk rows are ``obs[0] + i`` and which records the instruction."""

    def __init__(self, horizon: int, action_dim: int, dt: float) -> None:
        from edgerl.contract.planner import PlannerInfo

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
    from edgerl_ros.common import INSTRUCTION_QOS, TOPICS
    from edgerl_ros.messages import make_joint_state, stamp_to_ns
    from edgerl_ros.planner_node import PlannerNode
    from rclpy.parameter import Parameter
    from std_msgs.msg import String
    from trajectory_msgs.msg import JointTrajectory

    from edgerl.runtime.planners.server.server import PlannerServer, ServerConfig

    bundle = make_bundle_with_planner
    spec = PolicySpec.load(bundle)
    echo = _EchoPlanner(spec.chunk.horizon, spec.action.dim, spec.chunk.dt_s)
    server = PlannerServer(echo, ServerConfig(port=0))
    _, port = server.start()
    chunks: list[JointTrajectory] = []
    graph = PlannerGraph(rclpy_context, chunks.append)
    instr_pub = graph.probe.create_publisher(String, TOPICS["instruction"], INSTRUCTION_QOS)
    try:
        node = PlannerNode(context=rclpy_context, parameter_overrides=[
            Parameter("bundle", value=str(bundle)), Parameter("mode", value="remote"),
            Parameter("remote_port", value=int(port))])
        graph.start(node)
        instr_pub.publish(String(data="push the red block"))
        sent = {}
        t_end = time.monotonic() + 3.0
        while time.monotonic() < t_end and len(chunks) < 10:
            obs = np.full(spec.observation.dim, float(len(sent)))
            msg = make_joint_state(spec.observation.names, obs, time.time_ns())
            sent[stamp_to_ns(msg.header.stamp)] = obs[0]
            graph.state_pub.publish(msg)
            for _ in range(4):
                graph.ex.spin_once(timeout_sec=0.005)
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
        graph.close()
        server.stop()


@pytest.mark.ros
def test_episode_reset_drops_in_flight_result_and_replans_at_once(rclpy_context,
                                                                   make_bundle_with_planner):
    """A plan in flight at a reset (from the old episode's state) is not published; the next
    request starts on the first post-reset state instead of a period (1 s) later."""
    from edgerl_ros.common import EPISODE_QOS, TOPICS
    from edgerl_ros.messages import ns_to_stamp, stamp_to_ns
    from edgerl_ros.planner_node import PlannerNode
    from rclpy.parameter import Parameter
    from std_msgs.msg import Header

    bundle = make_bundle_with_planner
    spec = PolicySpec.load(bundle)
    chunks: list[tuple[float, int]] = []
    graph = PlannerGraph(rclpy_context, lambda m: chunks.append(
        (time.monotonic(), stamp_to_ns(m.header.stamp))))
    episode_pub = graph.probe.create_publisher(Header, TOPICS["episode"], EPISODE_QOS)

    try:
        node = PlannerNode(context=rclpy_context, parameter_overrides=[
            Parameter("bundle", value=str(bundle)), Parameter("mode", value="onnx"),
            Parameter("period_s", value=1.0), Parameter("extra_latency_s", value=0.3)])
        graph.start(node)
        graph.spin_states(spec, 3.0, until=lambda: len(chunks) >= 1)  # discovery, first chunk
        assert chunks, "no chunk from the planner"
        graph.spin_states(spec, 2.0, until=lambda: node.client.stats()["requests"] >= 2)
        assert node.client.stats()["requests"] == 2  # in flight, planned from an old state
        reset_ns = time.time_ns()
        msg = Header(frame_id="1")
        msg.stamp = ns_to_stamp(reset_ns)
        episode_pub.publish(msg)
        t_reset = time.monotonic()
        n_before = len(chunks)
        graph.spin_states(spec, 1.5, until=lambda: len(chunks) > n_before)
        after = chunks[n_before:]
        assert after, "no chunk after the reset"
        # the in-flight result was dropped; the first chunk out is from the new episode and
        # came well before the 1 s period (0.3 s in flight + 0.3 s replan + slack)
        assert after[0][1] >= reset_ns
        assert after[0][0] - t_reset < 0.9, after[0][0] - t_reset
        vals = node.values()
        assert vals["chunks_dropped_pre_reset"] == 1 and vals["episode_resets"] == 1
    finally:
        graph.close()


def test_period_and_latency_apply_at_run_time_others_refused(rclpy_context,
                                                             make_bundle_with_planner):
    """``period_s`` applies at run time (planning follows the new period), and so does
    ``extra_latency_s``; the others are refused."""
    from edgerl_ros.messages import make_joint_state
    from edgerl_ros.planner_node import PlannerNode
    from rclpy.parameter import Parameter

    bundle = make_bundle_with_planner
    spec = PolicySpec.load(bundle)
    chunks: list[float] = []
    graph = PlannerGraph(rclpy_context, lambda m: chunks.append(time.monotonic()))

    def count_for(seconds):
        n0 = len(chunks)
        graph.spin_states(spec, seconds)
        return len(chunks) - n0

    try:
        node = PlannerNode(context=rclpy_context, parameter_overrides=[
            Parameter("bundle", value=str(bundle)), Parameter("mode", value="onnx"),
            Parameter("period_s", value=1.0)])
        graph.start(node)
        count_for(1.5)  # discovery, first chunk
        slow = count_for(2.0)  # 1 s period: ~2
        assert node.set_parameters([Parameter("period_s", value=0.1)])[0].successful
        assert node.client.cfg.period_s == 0.1
        fast = count_for(2.0)  # 0.1 s period: ~20
        with open("/proc/loadavg") as fh:
            load = fh.read().split()[0]
        assert slow <= 3 and fast >= 3 * max(slow, 1), (slow, fast, load)
        assert node.set_parameters([Parameter("extra_latency_s", value=0.05)])[0].successful
        assert node.delayed.delay_s == 0.05
        res = node.set_parameters([Parameter("mode", value="expert")])[0]
        assert not res.successful and "mode" in res.reason  # read-only: rclpy refuses it
        # a state stamped 10 s ago is not planned on (counted by reason)
        old = make_joint_state(spec.observation.names, np.zeros(spec.observation.dim),
                               time.time_ns() - 10**10)
        t_end = time.monotonic() + 5.0
        while time.monotonic() < t_end and not node.drops.by_key():
            graph.state_pub.publish(old)
            graph.ex.spin_once(timeout_sec=0.02)
        assert node.drops.by_key() == {"robot/joint_states stale": node.drops.total}
    finally:
        graph.close()


@pytest.mark.ros
def test_a_reset_stamped_an_hour_ahead_is_refused(rclpy_context, make_bundle_with_planner):
    """A regression found by the soak: a robot/episode header stamped 1 h
    ahead moved the planner's reset time there, so every plan was dropped as "planned before
    the reset" for an hour and real resets were ignored as out of order."""
    from edgerl_ros.messages import ns_to_stamp
    from edgerl_ros.planner_node import PlannerNode
    from rclpy.parameter import Parameter
    from std_msgs.msg import Header

    node = PlannerNode(context=rclpy_context, parameter_overrides=[
        Parameter("bundle", value=str(make_bundle_with_planner)), Parameter("mode", value="onnx")])
    try:
        reset_t0 = node.out.reset_t
        node._on_episode(Header(stamp=ns_to_stamp(time.time_ns() + 3600 * 10**9)))
        assert node.episode_resets == 0 and node.out.reset_t == reset_t0
        assert node.drops.by_key() == {"robot/episode future": 1}
        node._on_episode(Header(stamp=ns_to_stamp(time.time_ns())))
        assert node.episode_resets == 1 and node.out.reset_t > reset_t0
    finally:
        node.shutdown()
        node.destroy_node()
