"""The task's LQR expert on the host side of the HIL: its gain read off the plant, the
fixed-rate controller that commands with it when no bundle is given, and the LQR-hold
planner that plans the chunks of bundles without a planner network."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from edgerl.contract.clock import MonotonicClock
from edgerl.runtime.serial_transport import SerialTransport

__all__ = ["LqrController", "LqrHoldPlanner", "Sink", "lqr_action", "lqr_gain", "plant_lqr"]

#: A command sink: ``sink(command (n_cmd,), t (s, monotonic))``; ``False`` when not sent.
Sink = Callable[[np.ndarray, float], Any]


def plant_lqr(plant: Any) -> np.ndarray | None:
    """The task's LQR gain ``K`` as numpy in its own dtype, None if the task has none."""
    gain = getattr(plant, "_lqr", None)
    return None if gain is None else gain.detach().cpu().numpy()


def lqr_gain(plant: Any) -> np.ndarray:
    """The task's LQR gain ``K`` (shape ``(n_cmd, obs_dim)`` or flat), float64; a task without
    one is an error naming it."""
    gain = plant_lqr(plant)
    if gain is None:
        raise ValueError(f"task {plant.spec.name!r} has no LQR expert: pass --bundle")
    return np.asarray(gain, np.float64)


def lqr_action(gain: np.ndarray, observation: np.ndarray) -> float:
    """``clip(-K obs, -1, 1)`` for a 1-D action (``gain`` flat, ``observation`` at least as
    long)."""
    return float(np.clip(-(observation[:gain.shape[0]] @ gain), -1.0, 1.0))


class LqrController:
    """Fixed-rate host controller ``a = clip(-K obs)`` (the task's LQR expert): the command
    source when no bundle is given."""

    def __init__(self, gain: np.ndarray, rate_hz: float, sink: Sink,
                 transport: SerialTransport, phase_s: float = 0.0) -> None:
        self.gain = np.asarray(gain, np.float64).reshape(-1)
        self.period = 1.0 / rate_hz
        self.sink = sink
        self.transport = transport
        self.phase_s = phase_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ticks = 0

    def start(self, t0: float) -> None:
        self._thread = threading.Thread(target=self._run, args=(t0,), name="hil-controller",
                                        daemon=True)
        self._thread.start()

    def _run(self, t0: float) -> None:
        clock = MonotonicClock()
        n = 0
        while not self._stop.is_set():
            deadline = t0 + self.phase_s + n * self.period
            now = clock.now()
            if deadline < now - self.period:  # stalled (freeze): skip missed ticks
                n = int((now - t0 - self.phase_s) / self.period) + 1
                continue
            clock.sleep_until(deadline)
            n += 1
            st = self.transport.latest_state()
            if st is None or st.state.shape[0] < self.gain.shape[0]:
                continue
            a = lqr_action(self.gain, st.state)
            self.sink(np.asarray([a], np.float32), deadline)
            self.ticks += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None


class LqrHoldPlanner:
    """A :class:`~edgerl.contract.planner.Planner` for bundles without ``planner.onnx``: every
    chunk repeats the LQR action for the observation it was given (a deliberately coarse
    planner; the bundle's edit policy refines it every tick)."""

    def __init__(self, gain: np.ndarray, horizon: int, dt_s: float, period_s: float) -> None:
        from edgerl.contract.planner import PlannerInfo

        self.gain = np.asarray(gain, np.float32).reshape(-1)
        self.info = PlannerInfo(horizon=horizon, action_dim=1, dt_s=dt_s, period_s=period_s,
                                expected_latency_s=0.0)

    def plan(self, observation: np.ndarray, instruction: str, now: float):
        from edgerl.contract.chunk import ActionChunk

        a = lqr_action(self.gain, observation)
        return ActionChunk(actions=np.full((self.info.horizon, 1), a, np.float32), t0=now,
                           dt=self.info.dt_s, obs_time=now, source="lqr-hold")

    def health(self):
        from edgerl.contract.planner import PlannerHealth

        return PlannerHealth.OK
