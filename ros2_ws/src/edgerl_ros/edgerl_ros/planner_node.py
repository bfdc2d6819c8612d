"""``planner_node``: the slow planner as a ROS 2 node.

Subscribes the robot state (``JointState``, observation names) and the instruction
(``std_msgs/String``); an :class:`edgerl.runtime.planners.client.client.PlannerClient` (thread mode:
supervision, late/error counters, backoff) plans every ``period_s`` (default: the manifest's
``chunk.period_s``) from the newest observation and the node publishes each chunk as
``trajectory_msgs/JointTrajectory``: ``header.stamp`` = the observation's stamp, point ``i``
at ``time_from_start = i * dt`` (row 0 is meant for the observation time; rows already past
when the chunk arrives are dropped by the edit loop), ``joint_names`` = the action names
(then ``intent/0 ..`` for a planner that exports an intent, :mod:`edgerl_ros.messages`).

Modes (``mode`` parameter):
* ``onnx``: the bundle's ``planner.onnx`` through onnxruntime (input ``(1, O)``, output
  ``(1, H, A)`` or ``(1, H*A)``, and ``intent`` ``(1, I)`` when it has one).
* ``expert`` (sim only): the sim task's privileged scripted expert, which ``sim_robot_node``
  publishes as a chunk on ``sim/expert_chunk`` (stamped with its state); the node serves the
  newest one at its own period and latency, truncated/held to the manifest's horizon.
* ``remote``: a planner server (``edgerl serve-planner``: e.g. the language-conditioned
  planner) at ``remote_host:remote_port`` through :class:`edgerl.runtime.planners.remote.planner.
  RemotePlanner`; the instruction topic's text goes with every request.
* ``auto``: ``onnx`` when the bundle has ``planner.onnx``, else ``expert``.

Episode resets (optional; ``robot/episode``, ``std_msgs/Header`` stamped with the new
episode's first state): a result planned from an older observation is not published
(``chunks_dropped_pre_reset``) and the next request starts on the first post-reset input (the
state; in ``expert`` mode the expert chunk) instead of waiting for the period. A call already
in flight cannot be interrupted; its result is dropped.

``extra_latency_s`` adds a fixed delay before publishing, to emulate a slow foundation model.
``period_s``, ``extra_latency_s`` and ``diagnostics_period_s`` apply at run time; the other
parameters are refused with a reason.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Header, String
from trajectory_msgs.msg import JointTrajectory

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.planner import PlannerHealth, PlannerInfo
from edgerl.contract.spec import PolicySpec
from edgerl.runtime.chunk_buffer import ChunkBuffer
from edgerl.runtime.input_guard import InputGuard
from edgerl.runtime.planners.local.delayed import DelayedPlanner
from edgerl.runtime.planners.local.onnx import OnnxChunkPlanner
from edgerl_ros.common import (
    CHUNK_QOS,
    DEVICE_PARAMS,
    EPISODE_QOS,
    INSTRUCTION_QOS,
    STATE_QOS,
    TOPICS,
    ParamSpec,
    declare_with_bundle,
    refuse_unless_live,
    run_node,
    trt_options,
)
from edgerl_ros.messages import (
    BadMessage,
    StampMemo,
    TimeBase,
    chunk_to_trajectory,
    stamp_to_ns,
    stamped_state,
    trajectory_to_chunk,
)
from edgerl_ros.node_diagnostics import NodeDiagnostics, Report
from edgerl_ros.stats import DropCounter, IntervalMeter, Samples

__all__ = ["PARAMS", "ExpertTopicPlanner", "PlannerNode", "onnx_chunk_planner",
           "PublishingBuffer", "fit_horizon", "main"]

log = logging.getLogger(__name__)

PLANNER_FILE = "planner.onnx"

PARAMS = [
    ParamSpec("bundle", "", "bundle directory (manifest.json, planner.onnx)", read_only=True),
    ParamSpec("mode", "auto", "planner source", choices=("auto", "onnx", "expert", "remote"),
              read_only=True),
    ParamSpec("remote_host", "127.0.0.1", "planner server host (mode remote)", read_only=True),
    ParamSpec("remote_port", 7700, "planner server TCP port (mode remote)", 1, 65535,
              read_only=True),
    ParamSpec("period_s", 0.0, "seconds between plans; 0 = manifest chunk.period_s", 0.0, 60.0),
    ParamSpec("extra_latency_s", 0.0, "added delay before publishing (emulate a slow model)",
              0.0, 10.0),
    ParamSpec("diagnostics_period_s", 1.0, "how often /diagnostics is published", 0.05, 60.0),
    *DEVICE_PARAMS,
]


def onnx_chunk_planner(path: str | Path, spec: PolicySpec, device: str = "cpu",
                       trt: Any = None) -> OnnxChunkPlanner:
    """The runtime's :class:`~edgerl.runtime.planners.local.onnx.OnnxChunkPlanner` over ``path``
    with the
    manifest's chunk timing (one ONNX planner implementation for the ROS node, the HIL
    harness and ``bench loop``), on ``device`` (``auto``: TensorRT EP, else CUDA EP, else
    CPU) with TensorRT EP options ``trt``."""
    info = PlannerInfo(horizon=spec.chunk.horizon, action_dim=spec.action.dim,
                       dt_s=spec.chunk.dt_s, period_s=spec.chunk.period_s,
                       expected_latency_s=spec.chunk.expected_latency_s)
    return OnnxChunkPlanner(path, info, device=device, trt=trt)


def fit_horizon(rows: np.ndarray, horizon: int) -> np.ndarray:
    """``rows`` ``(h, A)`` cut or extended (last row held) to ``(horizon, A)``."""
    rows = np.asarray(rows, dtype=np.float32)
    if rows.shape[0] >= horizon:
        return rows[:horizon]
    return np.concatenate([rows, np.repeat(rows[-1:], horizon - rows.shape[0], axis=0)])


class ExpertTopicPlanner:
    """:class:`edgerl.contract.planner.Planner` serving the newest chunk the sim robot's privileged
    expert published (sim only); its ``obs_time`` is that chunk's state stamp.

    Args:
        spec: The bundle's manifest (horizon and dt of the served chunks).
    """

    def __init__(self, spec: PolicySpec) -> None:
        self.info = PlannerInfo(horizon=spec.chunk.horizon, action_dim=spec.action.dim,
                                dt_s=spec.chunk.dt_s, period_s=spec.chunk.period_s,
                                expected_latency_s=spec.chunk.expected_latency_s)
        self._latest: ActionChunk | None = None
        self._lock = threading.Lock()

    def offer(self, chunk: ActionChunk) -> None:
        """Store the expert's newest chunk (subscription callback)."""
        rows = fit_horizon(chunk.actions, self.info.horizon)
        fitted = ActionChunk(rows, t0=chunk.t0, dt=self.info.dt_s, obs_time=chunk.obs_time,
                             source="expert")
        with self._lock:
            self._latest = fitted

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        with self._lock:
            chunk = self._latest
        if chunk is None:
            raise RuntimeError("no expert chunk received yet on sim/expert_chunk")
        return chunk

    def health(self) -> PlannerHealth:
        return PlannerHealth.OK if self._latest is not None else PlannerHealth.STARTING


class PublishingBuffer(ChunkBuffer):
    """A :class:`ChunkBuffer` that also publishes every pushed chunk (as planned, unmerged):
    the PlannerClient's output goes onto the ROS graph. Chunks the base buffer refuses
    (planned before ``reset_t``, the last episode reset, monotonic s, or not after the current
    chunk) are not published."""

    def __init__(self, publish: Any, action_dim: int) -> None:
        super().__init__("replace", action_dim)
        self._publish = publish

    def push(self, chunk: ActionChunk, now: float = -np.inf) -> ActionChunk:
        refused = self.dropped_pre_reset + self.dropped_old
        merged = super().push(chunk, now)
        if self.dropped_pre_reset + self.dropped_old == refused:
            self._publish(chunk)
        return merged


class PlannerNode(Node):
    """See the module docstring. Planning (a :class:`PlannerClient` thread) starts at
    construction; :meth:`shutdown` stops it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("planner_node", **kwargs)
        p, self.spec = declare_with_bundle(self, PARAMS, self._apply_params)
        from edgerl.runtime.edit_loop import ObservationSlot
        from edgerl.runtime.planners.client.client import PlannerClient, PlannerClientConfig

        bundle = Path(p["bundle"])
        mode = p["mode"]
        if mode == "auto":
            mode = "onnx" if (bundle / PLANNER_FILE).is_file() else "expert"
        self.mode = mode
        self.expert = ExpertTopicPlanner(self.spec) if mode == "expert" else None
        self.remote = None
        if mode == "remote":  # e.g. `edgerl serve-planner` (language-conditioned planners)
            from edgerl.runtime.planners.remote.planner import RemotePlanner

            self.remote = RemotePlanner(host=p["remote_host"], port=int(p["remote_port"]))
            self.remote.start()
        planner: Any = self.expert or self.remote or onnx_chunk_planner(
            bundle / PLANNER_FILE, self.spec, device=p["device"], trt=trt_options(p))
        self._onnx = planner if isinstance(planner, OnnxChunkPlanner) else None
        # always wrapped (0 s by default) so extra_latency_s can change at run time
        self.delayed = planner = DelayedPlanner(planner, float(p["extra_latency_s"]))
        self.period_s = float(p["period_s"]) or float(self.spec.chunk.period_s)
        self.timebase = TimeBase()
        self.stamps = StampMemo()
        self.obs_names = self.spec.observation.names
        self.action_names = self.spec.action.names
        self.drops = DropCounter()
        self.guard = InputGuard(self.spec)  # states too old / stamped ahead are not planned on
        self.latency = Samples()
        self.chunks = IntervalMeter(self.period_s)

        self.chunk_pub = self.create_publisher(JointTrajectory, TOPICS["chunk"], CHUNK_QOS)
        self.slot = ObservationSlot(self.spec.observation.dim)
        self.out = PublishingBuffer(self._publish, self.spec.action.dim)
        self.client = PlannerClient(planner, self.out, self.slot,
                                    PlannerClientConfig(period_s=self.period_s))
        self.episode_resets = 0
        self._replan_pending = False
        self._last_input_t = -np.inf  # newest state (expert mode: expert chunk) time
        self.create_subscription(JointState, TOPICS["state"], self._on_state, STATE_QOS)
        self.create_subscription(String, TOPICS["instruction"], self._on_instruction,
                                 INSTRUCTION_QOS)
        if self.expert is not None:
            self.create_subscription(JointTrajectory, TOPICS["expert"], self._on_expert,
                                     CHUNK_QOS)
        self.create_subscription(Header, TOPICS["episode"], self._on_episode, EPISODE_QOS)
        self.diagnostics = NodeDiagnostics(self, "edgerl: planner_node",
                                           p["diagnostics_period_s"], self._report)
        self.client.start()
        self.get_logger().info(f"planner: mode {mode}, period {self.period_s:g} s, "
                               f"H={self.spec.chunk.horizon} dt={self.spec.chunk.dt_s:g} s")

    def _apply_params(self, changed: dict[str, Any]) -> str | None:
        reason = refuse_unless_live(changed, {"period_s", "extra_latency_s",
                                              "diagnostics_period_s"})
        if reason is not None:
            return reason
        if "period_s" in changed:  # the client reads its period before every request
            self.period_s = float(changed["period_s"]) or float(self.spec.chunk.period_s)
            self.client.cfg.period_s = self.period_s
            self.chunks = IntervalMeter(self.period_s)
            self.client.replan_now()
        if "extra_latency_s" in changed:
            self.delayed.delay_s = float(changed["extra_latency_s"])
        if "diagnostics_period_s" in changed:
            self.diagnostics.set_period(changed["diagnostics_period_s"])
        return None

    def _on_state(self, msg: JointState) -> None:
        try:
            obs, stamp = stamped_state(msg, self.obs_names)
        except BadMessage as exc:
            self.drops.drop(TOPICS["state"], str(exc))
            return
        reason = self.guard.check_state(stamp * 1e-9, time.time_ns() * 1e-9)
        if reason is not None:
            self.drops.drop(TOPICS["state"], reason)
            return
        t = self.timebase.to_mono(stamp)
        self.stamps.remember(t, stamp)
        self.slot.write(obs, t)
        if self.expert is None:
            self._new_input(t)

    def _new_input(self, t: float) -> None:
        """The planner's input advanced to time ``t``: replan at once if it is the first
        input of a new episode."""
        self._last_input_t = max(self._last_input_t, t)
        if self._replan_pending and t >= self.out.reset_t:
            self._replan_pending = False
            self.client.replan_now()

    def _on_episode(self, msg: Header) -> None:
        """Episode reset: drop results planned before it; replan on the first new input."""
        stamp = stamp_to_ns(msg.stamp)
        t = self.timebase.to_mono(stamp)
        if t <= self.out.reset_t:  # duplicate / out of order
            return
        # a reset stamped far ahead would drop every plan until then (found by the soak)
        reason = self.guard.check_state(stamp * 1e-9, time.time_ns() * 1e-9)
        if reason is not None:
            self.drops.drop(TOPICS["episode"], reason)
            return
        self.out.reset_t = t
        self.episode_resets += 1
        self._replan_pending = True
        if self._last_input_t >= t:  # the new episode's input is already here
            self._new_input(self._last_input_t)

    def _on_expert(self, msg: JointTrajectory) -> None:
        try:
            chunk = trajectory_to_chunk(msg, self.action_names, self.timebase, source="expert")
        except BadMessage as exc:
            self.drops.drop(TOPICS["expert"], str(exc))
            return
        assert self.expert is not None
        self.expert.offer(chunk)
        self._new_input(chunk.obs_time)

    def _on_instruction(self, msg: String) -> None:
        self.client.cfg.instruction = str(msg.data)

    def _publish(self, chunk: ActionChunk) -> None:
        """PublishingBuffer callback (PlannerClient thread): chunk -> JointTrajectory."""
        try:
            self.chunk_pub.publish(chunk_to_trajectory(chunk, self.action_names, self.timebase,
                                                       self.stamps.get(chunk.obs_time)))
        except Exception as exc:  # context shutting down: count, never kill the client
            self.drops.drop(TOPICS["chunk"], f"publish_failed: {exc}")
            return
        now = time.perf_counter()
        self.latency.add(now - chunk.obs_time)
        self.chunks.mark(now)

    def values(self) -> dict[str, Any]:
        stats = self.client.stats()
        return {
            "mode": self.mode,
            "inference": getattr(self._onnx, "provider", "none"),
            "health": stats.pop("health"),
            "chunk_rate_hz": self.chunks.rate_hz(),
            "chunks_published": self.chunks.count,
            "planner_latency_p50_ms": self.latency.percentile(50) * 1e3,
            "planner_latency_p99_ms": self.latency.percentile(99) * 1e3,
            "last_plan_call_ms": stats.pop("last_latency_s") * 1e3,
            **stats,
            "episode_resets": self.episode_resets,
            "chunks_dropped_pre_reset": self.out.dropped_pre_reset,
            **self.drops.values(),
        }

    def _report(self) -> Report:
        vals = self.values()
        level, msg = 0, "ok"
        if vals["health"] in ("dead", "slow"):
            level, msg = (2 if vals["health"] == "dead" else 1), f"planner {vals['health']}"
        elif self.drops.total:
            level, msg = 1, self.drops.last_reason
        return self.spec.task, vals, level, msg

    def shutdown(self) -> None:
        self.client.stop()
        if self.remote is not None:
            self.remote.close()


def main(args: list[str] | None = None) -> int:
    return run_node(PlannerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
