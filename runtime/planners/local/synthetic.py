"""Stand-in planners for benchmarks and tests: real CPU work or sleeps, deterministic chunks.

:class:`BurnPlanner` burns CPU for ``latency_s`` per call, like a model's inference, then
returns a smooth chunk (sines clipped into the action limits). ``gil="release"`` burns in
``hashlib.sha256`` over a 256 KiB buffer, which releases the GIL as onnxruntime or torch
inference does; ``gil="hold"`` burns in Python bytecode (the worst case for a loop thread in
the same process). :class:`SyntheticPlanner` sleeps a modelled batch
cost (the planner-server load tests and ``edgerl bench planner``).

:func:`burn_planner` builds a :class:`BurnPlanner` in a planner subprocess from its
``"module:function"`` factory name.
"""

from __future__ import annotations

import hashlib
import logging
import time

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.planner import PlannerHealth, PlannerInfo

__all__ = ["BurnPlanner", "SyntheticPlanner", "burn_planner"]

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


def burn_planner(horizon: int, action_dim: int, dt_s: float, period_s: float,
                 latency_s: float = 0.07, gil: str = "release",
                 low: list[float] | None = None, high: list[float] | None = None,
                 crash_after: int = 0) -> BurnPlanner:
    """Factory (``edgerl.runtime.planners.local.synthetic:burn_planner``) for a planner subprocess.

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


class SyntheticPlanner:
    """A real tiny planner (chunk rows = obs[:A] + i) whose compute time is synthetic:
    ``base_s + row_s * rows`` per call, slept (so it releases the GIL like a GPU model).
    With ``batch=True`` it also has ``plan_batch``."""

    def __init__(self, obs_dim: int = 8, horizon: int = 8, action_dim: int = 2,
                 base_s: float = 0.002, row_s: float = 0.0001, batch: bool = True) -> None:
        self.info = PlannerInfo(horizon=horizon, action_dim=action_dim, dt_s=0.02,
                                period_s=0.1, expected_latency_s=base_s)
        self.obs_dim = obs_dim
        self.base_s, self.row_s = base_s, row_s
        if not batch:
            self.plan_batch = None  # type: ignore[assignment]

    def _rows(self, obs: np.ndarray) -> np.ndarray:
        a = self.info.action_dim
        return (np.asarray(obs, np.float32)[..., None, :a]
                + np.arange(self.info.horizon, dtype=np.float32)[:, None])

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        time.sleep(self.base_s + self.row_s)
        return ActionChunk(actions=self._rows(observation), t0=now, dt=self.info.dt_s,
                           obs_time=now, source="synthetic")

    def plan_batch(self, observations: np.ndarray, instructions: list[str],
                   now: float) -> np.ndarray:
        time.sleep(self.base_s + self.row_s * len(observations))
        return self._rows(observations)

    def health(self) -> PlannerHealth:
        return PlannerHealth.OK
