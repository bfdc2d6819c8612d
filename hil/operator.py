"""A scripted, deliberately suboptimal operator: the stand-in for a person in tests and
benchmarks, and the HIL's operator channel that feeds its records into the host-side loop.

:class:`ScriptedOperator` watches the plant's privileged state (cart-pole: ``[x, x_dot,
theta, theta_dot]``). When the robot is about to fail (``|theta| > theta_trigger`` or
``|x| > x_trigger``) it takes over for ``hold_steps`` control steps with a detuned, noisy
LQR correction (``clip(gain_scale * -K s + bias + noise, -1, 1)``, or with ``bangbang`` the
full-scale ``sign`` of it; with ``flip`` K the first K steps of each takeover command the
opposite sign, a startled operator: it rescues, but not the way an expert would), then
releases.
Deterministic for a seed.

:class:`OperatorChannel` connects it to a running :class:`~edgerl.runtime.edit_loop.EditLoop`:
every control period the harness passes the plant state; the records go into the loop's
:class:`~edgerl.contract.intervention.InterventionSlot` stamped on the loop's clock, and (with a
recorder) into the recording together with the loop's logged transitions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edgerl.contract.config_groups import build
from edgerl.contract.intervention import Intervention
from edgerl.contract.key_values import SpecValueError, parse_key_values
from edgerl.hil.lqr import plant_lqr

__all__ = ["Flaws", "OperatorChannel", "OperatorConfig", "ScriptedOperator", "Takeover",
           "operator_channel"]


@dataclass
class Takeover:
    """When the operator takes over, and for how long.

    Attributes:
        theta_trigger: Pole angle (rad) beyond which it takes over.
        x_trigger: Cart position (m) beyond which it takes over.
        hold_steps: Control steps per takeover.
    """

    theta_trigger: float = 0.2
    x_trigger: float = 1.5
    hold_steps: int = 15


@dataclass
class Flaws:
    """How its command departs from a clean rescue (commands bad to copy; none by default).

    Attributes:
        bias: A constant added to its command (action units): it still rescues the pole but
            pushes the cart one way while doing so (bad to copy outside a rescue).
        bangbang: Command ``sign(correction)`` at full scale (+-1) instead of the clipped
            correction: rescues from near failure, overshoots near upright.
        flip: The first ``flip`` control steps of each takeover command the negated
            correction (a startled operator who first pushes the wrong way, then rescues):
            commands that are bad to copy although the takeover as a whole prevents failure.
    """

    bias: float = 0.0
    bangbang: bool = False
    flip: int = 0


@dataclass
class OperatorConfig:
    """Scripted operator settings (:meth:`parse`, and
    :func:`edgerl.contract.config_groups.build`, set a group's field by its own name).

    Attributes:
        takeover: When it takes over and for how long.
        gain_scale: Its LQR gain times this (1 = the expert; < 1 detuned).
        damping: Its gain on the two rates (cart and pole velocity) times this on top (0 =
            it reacts only to where the cart and pole are, not to how fast they move: a
            crude correction that rescues for a few steps but does not balance well).
        noise: Std of the Gaussian added to its command (action units).
        seed: Noise seed.
        flaws: Its deliberate flaws (bias, bang-bang, startled flip).
    """

    takeover: Takeover = field(default_factory=Takeover)
    gain_scale: float = 0.6
    damping: float = 1.0
    noise: float = 0.2
    seed: int = 0
    flaws: Flaws = field(default_factory=Flaws)

    def __post_init__(self) -> None:
        take, flip = self.takeover, self.flaws.flip
        if take.theta_trigger <= 0 or take.x_trigger <= 0:
            raise ValueError("operator: theta_trigger and x_trigger must be > 0")
        if take.hold_steps < 1:
            raise ValueError(f"operator: hold_steps must be >= 1, got {take.hold_steps}")
        if not 0 <= flip <= take.hold_steps:
            raise ValueError(f"operator: flip must be in [0, hold_steps={take.hold_steps}], "
                             f"got {flip}")
        if self.gain_scale <= 0 or self.noise < 0 or self.damping < 0:
            raise ValueError("operator: gain_scale must be > 0, damping and noise >= 0")

    @classmethod
    def parse(cls, text: str) -> OperatorConfig:
        """``"theta=0.2,x=1.5,hold=15,gain=0.6,damping=1,noise=0.2,seed=0,bias=0,bangbang=0,flip=0"``
        (any subset; ``""`` = defaults; ``bangbang`` is 0 or 1)."""
        fields = {"theta": ("theta_trigger", float), "x": ("x_trigger", float),
                  "hold": ("hold_steps", int), "gain": ("gain_scale", float),
                  "damping": ("damping", float), "noise": ("noise", float),
                  "seed": ("seed", int), "bias": ("bias", float),
                  "bangbang": ("bangbang", _zero_or_one), "flip": ("flip", int)}
        kw = parse_key_values(text, "operator", fields)
        return build(cls, **kw)


def _zero_or_one(value: str) -> bool:
    """``bangbang``'s value: 0 or 1 (a number that is neither is refused by name)."""
    flag = float(value)
    if flag not in (0.0, 1.0):
        raise SpecValueError(f"bangbang={value!r} must be 0 or 1")
    return bool(flag)


class ScriptedOperator:
    """Decides, per control step, whether to take over and with what command.

    Args:
        gain: ``(4,)`` LQR gain ``K`` of the task's expert (``a = -K s``).
        cfg: :class:`OperatorConfig`.
    """

    def __init__(self, gain: np.ndarray, cfg: OperatorConfig | None = None) -> None:
        self.cfg = cfg or OperatorConfig()
        self.gain = np.asarray(gain, np.float64).reshape(-1) * self.cfg.gain_scale
        self.gain[1::2] *= self.cfg.damping  # x_dot, theta_dot
        self.rng = np.random.default_rng(self.cfg.seed)
        self.left = 0  # steps of the current takeover still to go
        self.active = False  # an override is in force (a release is due when it ends)
        self.takeovers = 0
        self.into = 0  # control steps since the current takeover started

    def in_danger(self, state: np.ndarray) -> bool:
        """Whether ``state`` ``[x, x_dot, theta, theta_dot, ...]`` is near failure."""
        take = self.cfg.takeover
        return bool(abs(state[2]) > take.theta_trigger or abs(state[0]) > take.x_trigger)

    def step(self, state: np.ndarray, now: float) -> Intervention | None:
        """The record to send for this control step (``None``: nothing new)."""
        danger = self.in_danger(state)
        if self.left == 0:
            if not danger:
                if not self.active:
                    return None
                self.active = False
                return Intervention("release", now)
            if not self.active:  # a new takeover (a still-dangerous state extends one)
                self.takeovers += 1
                self.into = 0
            self.left = self.cfg.takeover.hold_steps
        self.left -= 1
        self.active = True
        wrong = self.into < self.cfg.flaws.flip
        self.into += 1
        return Intervention("override", now,
                            np.asarray([self.command(state, wrong)], np.float32))

    def command(self, state: np.ndarray, wrong: bool = False) -> float:
        """Its command for ``state`` (action units, in ``[-1, 1]``; draws the noise);
        ``wrong``: the correction's sign is flipped (the bias is not)."""
        a = -float(state[:self.gain.shape[0]] @ self.gain) * (-1.0 if wrong else 1.0)
        a += self.cfg.flaws.bias
        a += self.cfg.noise * float(self.rng.standard_normal())
        if self.cfg.flaws.bangbang:
            return float(np.sign(a))
        return float(np.clip(a, -1.0, 1.0))

    def reset(self) -> None:
        """A new episode: no takeover in progress (the loop drops its override at reset)."""
        self.left = 0
        self.active = False


class OperatorChannel:
    """The HIL's operator channel into a running edit loop (and, optionally, a recording).

    Args:
        operator: The scripted operator.
        loop: The host-side ``EditLoop`` (its ``interventions`` slot and ``transitions``).
        recorder: An :class:`~edgerl.contract.intervention_log.InterventionRecorder` or ``None``.
    """

    def __init__(self, operator: ScriptedOperator | None, loop, recorder=None) -> None:
        self.operator = operator
        self.loop = loop
        self.recorder = recorder
        if recorder is not None and loop.transitions is None:
            loop.log_transitions()

    def observe(self, state: np.ndarray, done: bool) -> None:
        """After a plant step: ``state`` is the privileged plant state, ``done`` whether the
        episode just ended (the plant already reset)."""
        if self.operator is None:
            return
        if done:
            self.operator.reset()
            return
        now = time.perf_counter()  # the loop's MonotonicClock
        iv = self.operator.step(state, now)
        if iv is None:
            return
        self.loop.interventions.push(iv, now)
        if self.recorder is not None:
            self.recorder.write_intervention(iv)

    def end_episode(self) -> None:
        """An episode ended: the operator forgets its takeover; the loop's logged ticks so far
        go to the recording."""
        if self.operator is not None:
            self.operator.reset()
        if self.recorder is not None and self.loop.transitions is not None:
            self.recorder.write_ticks(self.loop.transitions.drain())

    def close(self) -> dict[str, object]:
        """Write what is left, finish the recording (idempotent); returns counts for the HIL
        result."""
        out: dict[str, object] = {"operator_records": dict(self.loop.interventions.counts)}
        if self.operator is not None:
            out["operator_takeovers"] = self.operator.takeovers
        if self.recorder is not None:
            if not self.recorder.closed:
                self.end_episode()
                self.recorder.close()
            out.update(record=str(self.recorder.path), recorded_ticks=self.recorder.ticks,
                       dropped_ticks=self.loop.transitions.dropped)
        return out


def operator_channel(cfg: OperatorConfig | None, record: Path | None, loop, plant,
                     bundle: Path | None) -> OperatorChannel | None:
    """The HIL's channel for ``cfg`` / ``record`` (``None`` when neither is asked for).
    The operator's gain is the plant's LQR expert (raises ``ValueError`` without one)."""
    if cfg is None and record is None:
        return None
    operator = None
    if cfg is not None:
        gain = plant_lqr(plant)
        if gain is None:
            raise ValueError(f"task {plant.spec.name!r} has no LQR expert for the scripted "
                             "operator")
        operator = ScriptedOperator(gain, cfg)
    recorder = None
    if record is not None:
        from edgerl.contract.intervention_log import InterventionRecorder

        meta = {"bundle": str(bundle), "operator": "none" if cfg is None else str(cfg)}
        recorder = InterventionRecorder(record, meta)
    return OperatorChannel(operator, loop, recorder)
