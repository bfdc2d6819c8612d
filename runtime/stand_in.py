"""Stand-in planners for benchmarks and tests: real CPU work, deterministic chunks.

:class:`BurnPlanner` burns CPU for ``latency_s`` per call, like a model's inference, then
returns a smooth chunk (sines clipped into the action limits). ``gil="release"`` burns in
``hashlib.sha256`` over a 256 KiB buffer, which releases the GIL as onnxruntime or torch
inference does; ``gil="hold"`` burns in Python bytecode (the worst case for a loop thread in
the same process). :class:`OnnxChunkPlanner` runs a bundle's ``planner.onnx``
(observation in, ``H x A`` chunk out) on one onnxruntime thread. :class:`DelayedPlanner`
adds a fixed latency to any planner (a fast network standing in for a slow foundation model).

Both can be built in a planner subprocess from a ``"module:function"`` factory name (see
:func:`burn_planner`, :func:`onnx_planner`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.chunk import ActionChunk
from edgerl.planner import PlannerHealth, PlannerInfo

__all__ = ["BurnPlanner", "DelayedPlanner", "OnnxChunkPlanner", "burn_planner", "onnx_planner"]

log = logging.getLogger(__name__)
_BLOCK = bytes(256 * 1024)


class BurnPlanner:
    """A planner that takes ``latency_s`` of CPU per call and returns sine chunks.

    Row ``i`` of the chunk for observation time ``now`` is
    ``clip(amplitude * sin(2 pi freq_hz (now + i dt) + phase_j), low, high)`` for action
    element ``j`` (``phase_j = j``); ``t0 = now``.
    """

    def __init__(self, info: PlannerInfo, latency_s: float = 0.07, gil: str = "release",
                 amplitude: float = 0.5, freq_hz: float = 0.5,
                 low: list[float] | None = None, high: list[float] | None = None) -> None:
        if gil not in ("release", "hold"):
            raise ValueError(f"gil must be release or hold, got {gil!r}")
        self.info = info
        self.latency_s = latency_s
        self.gil = gil
        self.amplitude = amplitude
        self.freq_hz = freq_hz
        a = info.action_dim
        self.low = np.full(a, -np.inf, np.float32) if low is None else np.asarray(low, np.float32)
        self.high = np.full(a, np.inf, np.float32) if high is None else np.asarray(high,
                                                                                   np.float32)
        self.calls = 0

    def _burn(self, seconds: float) -> None:
        end = time.perf_counter() + seconds
        if self.gil == "release":
            while time.perf_counter() < end:
                hashlib.sha256(_BLOCK)
        else:
            x = 0
            while time.perf_counter() < end:
                for i in range(200):
                    x += i * i

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        self._burn(self.latency_s)
        self.calls += 1
        info = self.info
        t = now + info.dt_s * np.arange(info.horizon)[:, None]
        phase = np.arange(info.action_dim)[None, :]
        actions = self.amplitude * np.sin(2 * np.pi * self.freq_hz * t + phase)
        actions = np.clip(actions, self.low, self.high)
        return ActionChunk(actions=actions.astype(np.float32), t0=now, dt=info.dt_s,
                           obs_time=now, source="burn")

    def health(self) -> PlannerHealth:
        return PlannerHealth.OK


class OnnxChunkPlanner:
    """``planner.onnx``: input ``(1, O)`` observation, output ``(1, H*A)`` or ``(1, H, A)``.

    ``device`` / ``trt``: where onnxruntime runs it (``edgerl.runtime.inference.DEVICES``,
    TensorRT EP options); ``provider`` is the execution provider it really runs on.
    """

    def __init__(self, model: str | Path, info: PlannerInfo, device: str = "cpu",
                 trt: Any = None) -> None:
        import onnxruntime as ort

        from edgerl.runtime.inference import OrtBackend

        sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        inputs = sess.get_inputs()
        if len(inputs) != 1:
            raise ValueError(f"{model}: expected one input (the observation), got "
                             f"{[i.name for i in inputs]}; language-conditioned planners are "
                             "served with `edgerl serve-planner`")
        in_name, out_name = inputs[0].name, sess.get_outputs()[0].name
        del sess
        self.net = OrtBackend(model, input_name=in_name, output_name=out_name, warmup=3,
                              device=device, trt=trt)
        self.provider = self.net.session.get_providers()[0]
        self.info = info
        if self.net.output.size != info.horizon * info.action_dim:
            raise ValueError(f"{model}: output has {self.net.output.size} elements, expected "
                             f"horizon*action_dim = {info.horizon * info.action_dim}")

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        np.copyto(self.net.input.reshape(-1), observation)
        out = self.net.infer().reshape(self.info.horizon, self.info.action_dim)
        return ActionChunk(actions=out.copy(), t0=now, dt=self.info.dt_s, obs_time=now,
                           source="planner.onnx")

    def health(self) -> PlannerHealth:
        return PlannerHealth.OK


def burn_planner(horizon: int, action_dim: int, dt_s: float, period_s: float,
                 latency_s: float = 0.07, gil: str = "release",
                 low: list[float] | None = None, high: list[float] | None = None,
                 crash_after: int = 0) -> BurnPlanner:
    """Factory (``edgerl.runtime.stand_in:burn_planner``) for a planner subprocess.

    ``crash_after > 0``: the process exits hard after that many chunks (tests).
    """
    info = PlannerInfo(horizon=horizon, action_dim=action_dim, dt_s=dt_s, period_s=period_s,
                       expected_latency_s=latency_s)
    planner = BurnPlanner(info, latency_s=latency_s, gil=gil, low=low, high=high)
    if crash_after > 0:
        return _Crashing(planner, crash_after)  # type: ignore[return-value]
    return planner


class _Crashing:
    """Wraps a planner; the process dies (``os._exit``) on call ``n + 1``."""

    def __init__(self, inner: BurnPlanner, n: int) -> None:
        self.inner, self.n, self.info = inner, n, inner.info

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        if self.inner.calls >= self.n:
            import os

            os._exit(3)
        return self.inner.plan(observation, instruction, now)

    def health(self) -> PlannerHealth:
        return PlannerHealth.OK


class DelayedPlanner:
    """Wraps a planner and sleeps ``delay_s`` after each plan: its chunks arrive as late as a
    slow model's would (the chunk keeps the observation time it was planned from)."""

    def __init__(self, inner: object, delay_s: float) -> None:
        if not delay_s >= 0:
            raise ValueError(f"planner delay must be >= 0 s, got {delay_s}")
        self.inner, self.delay_s = inner, float(delay_s)
        info = inner.info  # type: ignore[attr-defined]
        self.info = PlannerInfo(horizon=info.horizon, action_dim=info.action_dim,
                                dt_s=info.dt_s, period_s=info.period_s,
                                expected_latency_s=info.expected_latency_s + self.delay_s)

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        chunk = self.inner.plan(observation, instruction, now)  # type: ignore[attr-defined]
        time.sleep(self.delay_s)
        return chunk

    def health(self) -> PlannerHealth:
        return self.inner.health()  # type: ignore[attr-defined]


def onnx_planner(model: str, horizon: int, action_dim: int, dt_s: float,
                 period_s: float, extra_latency_s: float = 0.0
                 ) -> OnnxChunkPlanner | DelayedPlanner:
    """Factory (``edgerl.runtime.stand_in:onnx_planner``) for a planner subprocess;
    ``extra_latency_s > 0`` wraps it in a :class:`DelayedPlanner`."""
    info = PlannerInfo(horizon=horizon, action_dim=action_dim, dt_s=dt_s, period_s=period_s,
                       expected_latency_s=0.0)
    planner = OnnxChunkPlanner(model, info)
    return DelayedPlanner(planner, extra_latency_s) if extra_latency_s > 0 else planner
