"""The HIL's host-side command sources: the LQR expert at a fixed rate, the deployed runtime
over a bundle (``EditLoop`` + planner client), the LQR-hold planner for bundles without a
planner network, and the sink wrapper that the ``freeze`` fault stalls. The fast-loop mode's
host side is :mod:`edgerl.hil.fast_loop`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.contract.clock import MonotonicClock
from edgerl.runtime.serial_transport import SerialTransport, StateSample

__all__ = ["BundleController", "FreezableSink", "LqrController", "LqrHoldPlanner", "Sink",
           "lqr_gain", "make_controller"]

Sink = Callable[[np.ndarray, float], Any]


class FreezableSink:
    """Wraps a command sink; :meth:`freeze` makes the next call stall the caller's thread
    (a host freeze: no setpoints, no heartbeats)."""

    def __init__(self, inner: Sink) -> None:
        self.inner = inner
        self._freeze_s = 0.0
        self.freezes: list[tuple[float, float]] = []  # (start, end) host times
        self.last_sent_t = float("nan")

    def freeze(self, seconds: float) -> None:
        self._freeze_s = seconds

    def __call__(self, command: np.ndarray, t: float) -> Any:
        if self._freeze_s > 0:
            start = time.perf_counter()
            time.sleep(self._freeze_s)
            self._freeze_s = 0.0
            self.freezes.append((start, time.perf_counter()))
        ok = self.inner(command, t)
        if ok is not False:
            self.last_sent_t = time.perf_counter()
        return ok


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
            a = float(np.clip(-(st.state[:self.gain.shape[0]] @ self.gain), -1.0, 1.0))
            self.sink(np.asarray([a], np.float32), deadline)
            self.ticks += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None


class LqrHoldPlanner:
    """A :class:`~edgerl.contract.planner.Planner` for bundles without ``planner.onnx``: every chunk
    repeats the LQR action for the observation it was given (a deliberately coarse planner;
    the bundle's edit policy refines it every tick)."""

    def __init__(self, gain: np.ndarray, horizon: int, dt_s: float, period_s: float) -> None:
        from edgerl.contract.planner import PlannerInfo

        self.gain = np.asarray(gain, np.float32).reshape(-1)
        self.info = PlannerInfo(horizon=horizon, action_dim=1, dt_s=dt_s, period_s=period_s,
                                expected_latency_s=0.0)

    def plan(self, observation: np.ndarray, instruction: str, now: float):
        from edgerl.contract.chunk import ActionChunk

        a = float(np.clip(-(observation[:self.gain.shape[0]] @ self.gain), -1.0, 1.0))
        return ActionChunk(actions=np.full((self.info.horizon, 1), a, np.float32), t0=now,
                           dt=self.info.dt_s, obs_time=now, source="lqr-hold")

    def health(self):
        from edgerl.contract.planner import PlannerHealth

        return PlannerHealth.OK


class BundleController:
    """The deployed runtime as the host side: the runtime's ``EditLoop`` over the bundle's policy,
    fed by STATE echoes, commanding through the serial sink, with a ``PlannerClient`` running
    ``planner.onnx`` (or :class:`LqrHoldPlanner` when the bundle has none). With a
    ``budget_planner`` (a bundle with a gate) the gated client runs instead: ``gate_policy``
    (the bundle's gate.onnx, or a baseline) picks the budget at every decision, and without a
    usable plan the command is zero, as in the sim's gated env."""

    def __init__(self, bundle: Path, rate_hz: float, sink: Sink, transport: SerialTransport,
                 obs_dim: int, n_cmd: int, gain: np.ndarray | None,
                 planner_latency_s: float = 0.0, budget_planner: Any = None,
                 gate_policy: str = "gate", seed: int = 0) -> None:
        from edgerl.contract.spec import load_bundle_manifest
        from edgerl.runtime.deployment import Deployment
        from edgerl.runtime.edit_loop import LoopConfig
        from edgerl.runtime.safety import SafetyConfig

        spec = load_bundle_manifest(bundle)
        if spec.observation.dim > obs_dim or spec.action.dim != n_cmd:
            raise ValueError(f"bundle {bundle}: obs {spec.observation.dim} / action "
                             f"{spec.action.dim} do not fit the plant (obs {obs_dim}, "
                             f"action {n_cmd})")
        # an edit policy runs on zero rows until the first chunk arrives, as in training
        stale = "policy" if spec.method == "edit" else "hold"
        safety = SafetyConfig(stale_policy="zero" if budget_planner is not None else stale)
        ch = spec.chunk
        planner: object = "auto"
        if budget_planner is not None:
            planner = "none"
        elif not (Path(bundle) / "planner.onnx").exists():
            planner = (LqrHoldPlanner(gain, ch.horizon, ch.dt_s, ch.period_s)
                       if gain is not None and spec.action.dim == 1 else "none")
        self.deployment = dep = Deployment.from_bundle(
            bundle, sink, loop_cfg=LoopConfig(rate_hz=rate_hz, gc_freeze=False, safety=safety,
                                              trigger="state" if budget_planner else ""),
            planner=planner, extra_latency_s=planner_latency_s, budget_planner=budget_planner,
            gate_policy=gate_policy, gate_seed=seed)
        self.spec, self.buffer, self.loop, self.client = dep.spec, dep.buffer, dep.loop, \
            dep.client
        self._obs_dim = spec.observation.dim
        # gated: each observation stamped when it was sensed, so the gate's decisions and
        # chunk ages count control steps as the sim does; and the loop ticks on each new
        # plant state (trigger "state"), so the command for state k is row k of the plan,
        # applied at the plant's next step, as in the sim. On its own clock the loop's phase
        # against the plant's steps is set by when each started: a tick just before a state
        # arrives runs on the previous state and the previous row (a one-step lag; in the
        # sim that costs the calm_kicks gate 8 return, the age heuristic nothing)
        self._stamp_sensed = budget_planner is not None
        self._last_stamp: int | None = None
        #: New plant states written to the loop (one per plant step; echoes of an unchanged
        #: state are not: a state-triggered loop would tick on each of them).
        self.states_written = 0
        transport.on_state = self._on_state

    def episode_reset(self, t: float) -> None:
        """The plant restarted an episode at monotonic time ``t`` (as ``robot/episode`` does
        on ROS 2): drop the old episode's chunks and history, replan at once."""
        self.deployment.episode_reset(t)

    def _on_state(self, s: StateSample) -> None:
        """One observation per plant state: the firmware repeats its newest state in every
        STATE (each setpoint's echo, the state period), and only the first STATE of a sensor
        sample (a new ``sensor_stamp_us``) is written to the loop's slot."""
        if s.state.shape[0] < self._obs_dim:  # no plant state before the first SENSOR
            return
        stamp = s.sensor_stamp_us
        if stamp == self._last_stamp:  # the same sensor sample again
            return
        self._last_stamp = stamp
        t = s.t_host - s.sensor_age_us * 1e-6 if self._stamp_sensed else s.t_host
        self.loop.obs.write(s.state[:self._obs_dim], t)
        self.states_written += 1

    def start(self, t0: float) -> None:
        self.deployment.start()

    def stop(self) -> None:
        self.deployment.stop()


def _plant_lqr(plant: Any) -> np.ndarray | None:
    """The task's LQR gain ``K`` as numpy in its own dtype, None if the task has none."""
    gain = getattr(plant, "_lqr", None)
    return None if gain is None else gain.detach().cpu().numpy()


def lqr_gain(plant: Any) -> np.ndarray:
    """The task's LQR gain ``K`` (shape ``(n_cmd, obs_dim)`` or flat), float64; a task without
    one is an error naming it."""
    gain = _plant_lqr(plant)
    if gain is None:
        raise ValueError(f"task {plant.spec.name!r} has no LQR expert: pass --bundle")
    return np.asarray(gain, np.float64)


def make_controller(bundle: Path | None, fast: bool, plant: Any, rate_hz: float, sink: Sink,
                    transport: SerialTransport, obs_dim: int, *, planner_latency_s: float,
                    budget_planner: Any, gate_policy: str, seed: int) -> Any:
    """The host side of one HIL run: the fast loop's chunk streamer (``fast`` with a
    ``bundle``: the MCU edits), the task's LQR expert at ``rate_hz`` half a period after the
    plant (no bundle), else the deployed runtime over ``bundle``. The LQR gain, where the
    task has one, is the bundles' planner fallback."""
    from edgerl.hil.fast_loop import FastLoopController

    gain = _plant_lqr(plant)
    if fast and bundle is not None:
        return FastLoopController(bundle, transport, obs_dim, gain,
                                  planner_latency_s=planner_latency_s)
    if bundle is None:
        return LqrController(lqr_gain(plant), rate_hz, sink, transport, 0.5 / rate_hz)
    return BundleController(bundle, rate_hz, sink, transport, obs_dim, int(plant.num_actions),
                            gain, planner_latency_s=planner_latency_s,
                            budget_planner=budget_planner, gate_policy=gate_policy, seed=seed)
