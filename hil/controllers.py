"""The HIL's host-side command source over a bundle (the deployed runtime: ``EditLoop`` +
planner client) and the sink wrapper that the ``freeze`` fault stalls. The task's LQR expert
and the LQR-hold planner are :mod:`edgerl.hil.lqr`, the fast-loop mode's host side is
:mod:`edgerl.hil.fast_loop`; :mod:`edgerl.hil.host_side` chooses among them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.hil.lqr import LqrHoldPlanner, Sink
from edgerl.runtime.serial_transport import SerialTransport, StateSample

__all__ = ["BundleController", "FreezableSink", "Sink"]


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

        # the sizes only: Deployment.from_bundle below is the gate (verify_bundle)
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
