"""``TimingSpec``: the one place chunk timing is decided, for training and for the robot.

Every rule about *when* a chunk row is used lives here; the sim wrappers
(``edgerl.sim.wrappers.chunk.ChunkScheduler``, ``LatencyWrapper``) and the runtime
(``ChunkBuffer``, ``EditLoop``) call these functions and nothing else computes them (a test
scans the sources). Pure Python/numpy, so the torch-free runtime imports it. Each rule below
is one function of :mod:`edgerl.contract.timing_rules` (with :class:`LatencyModel`), part of this
module's API; :class:`TimingSpec` applies them to one bundle.

The rules, in control steps of ``dt = 1 / control_hz`` (a chunk queried at step ``k`` has
``step0 = k``; its row ``i`` is meant for step ``k + i``; ``offset = t - step0``):

* **delay**: the planner's chunk arrives ``D`` steps after its query; ``D`` is drawn from
  ``latency`` (fixed, a distribution, uniform jitter) plus a per-episode extra delay in
  ``extra_delay_steps`` (domain randomization). ``D_max`` = :func:`max_planner_delay`.
* **horizon**: ``H = max(MIN_HORIZON, P + D_max + rows_ahead + HORIZON_MARGIN)``
  (:func:`default_horizon`); ``rows_ahead`` is the edit observation's lookahead (``blend``: at
  least the blend length). :func:`required_horizon` is the smallest safe ``H`` (no margin).
* **adoption**: an arrived chunk replaces the current one only if it was planned later
  (:func:`is_newer`); a chunk planned before an episode reset is refused.
* **row and stale**: the row for offset ``o`` is ``clip(o, 0, H - 1)`` (past the last row the
  last row holds); the chunk is usable while ``o < H + stale_steps`` (:func:`chunk_usable`),
  then the loop is in its stale fallback (training: zero rows, ``has_chunk = 0``).
  ``stale_steps`` defaults to ``P``.
* **merge**: ``replace`` (the new chunk as is), ``blend`` (the rows of the *previous raw*
  chunk that still exist are cross-faded into the new chunk over the first ``B`` steps after
  arrival, new-chunk weight ``w_k = (k + 1) / (B + 1)`` at the ``k``-th step after arrival;
  ``B = blend_steps``, default ``P``), ``average`` (runtime only: ``new_weight`` over the
  whole overlap). ``blend`` bundles blend, every other method replaces.
* **trigger**: ``clock`` ticks on the loop's own grid; ``state`` ticks on each state message,
  with a clock fallback after ``trigger_timeout_periods`` periods without one. A clock trigger
  samples a state that is up to one period old (unsynchronised clocks): training models it as
  one extra step of observation delay (:func:`sampling_delay_steps`).
* **input bounds** (:mod:`edgerl.runtime.input_guard`): a state older than
  ``state_max_age_periods`` control periods, or a state/chunk/command stamped more than
  ``future_skew_s`` ahead of the receiver's clock, is dropped; a command older than
  ``command_max_age_s`` is refused by the robot side.
* **escalation** (:mod:`edgerl.runtime.escalation`): without a usable input the loop holds
  the last command for ``hold_s``, then decays it to the safe action over ``decay_s``, then
  latches the e-stop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from edgerl.contract import timing_rules
from edgerl.contract.serde import SchemaError
from edgerl.contract.timing_rules import *  # noqa: F403  (the rules are part of this module's API)
from edgerl.contract.timing_rules import (
    MERGE_RULES,
    LatencyModel,
    check_trigger,
    chunk_row,
    chunk_usable,
    default_horizon,
    default_merge,
    max_planner_delay,
    merge_weights,
    resolve_blend_steps,
    resolve_stale_steps,
    step_offset,
    usable_steps,
)

__all__ = ["TimingSpec", *timing_rules.__all__]


#: The largest value each safety timing field may take (a manifest beyond it would turn a
#: guard off: a 1e9 s command age accepts any stale command, a 1e6 s hold keeps the last
#: command forever after a planner stall). Seconds unless the name says periods.
TIMING_MAX: dict[str, float] = {
    "trigger_timeout_periods": 100.0,
    "state_max_age_periods": 100.0,
    "future_skew_s": 1.0,
    "command_max_age_s": 2.0,
    "hold_s": 5.0,
    "decay_s": 10.0,
}


def check_timing_bounds(t: TimingSpec) -> None:
    """Raise :class:`SchemaError` naming the first safety timing field above
    :data:`TIMING_MAX`."""
    for key, limit in TIMING_MAX.items():
        value = getattr(t, key)
        if value > limit:
            unit = "periods" if key.endswith("_periods") else "s"
            raise SchemaError(f"timing.{key}: at most {limit:g} {unit}, got {value:g} (a "
                              "larger bound turns the guard it sets off)")


@dataclass
class TimingSpec:
    """All chunk timing of one bundle (saved whole in the manifest as ``timing``).

    Attributes:
        control_hz: Loop rate; one step is ``1 / control_hz`` seconds.
        horizon: Chunk rows H.
        latency: Planner delay (fixed, distribution, jitter), period P, and the edit,
            sensor and actuator delays, in steps.
        extra_delay_steps: ``[lo, hi]`` per-episode extra planner delay drawn in training
            (domain randomization); ``[0, 0]`` when none.
        stale_steps: A chunk is usable until ``offset >= H + stale_steps`` (last row held).
        merge: One of :data:`MERGE_RULES`.
        blend_steps: Blend length B (``blend``; >= 1).
        new_weight: The new chunk's weight for ``average``.
        trigger: ``clock`` or ``state`` (see module doc).
        trigger_timeout_periods: ``state`` trigger: tick on the clock after this many
            periods without a state message.
        state_max_age_periods: A state stamped more than this many control periods before
            it is received is dropped (never drives the loop).
        future_skew_s: A state, chunk or command stamped more than this many seconds ahead
            of the receiver's clock is dropped (clock skew allowance).
        command_max_age_s: The robot side refuses a command whose stamp (the state it was
            computed from) is older than this (s).
        hold_s: Escalation: hold the last command this long after the input went bad (s).
        decay_s: Escalation: then move it linearly to the safe action over this long (s),
            then latch the e-stop.
    """

    control_hz: float
    horizon: int
    latency: LatencyModel = field(default_factory=LatencyModel)
    extra_delay_steps: list[int] = field(default_factory=lambda: [0, 0])
    stale_steps: int = 1
    merge: str = "replace"
    blend_steps: int = 1
    new_weight: float = 0.5
    trigger: str = "clock"
    trigger_timeout_periods: float = 1.5
    state_max_age_periods: float = 25.0
    future_skew_s: float = 0.1
    command_max_age_s: float = 0.5
    hold_s: float = 0.2
    decay_s: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.latency, dict):
            self.latency = LatencyModel(**self.latency)
        if not self.control_hz > 0:
            raise SchemaError(f"timing.control_hz: must be > 0, got {self.control_hz}")
        if self.horizon < 1:
            raise SchemaError(f"timing.horizon: must be >= 1, got {self.horizon}")
        if len(self.extra_delay_steps) != 2 or not 0 <= self.extra_delay_steps[0] \
                <= self.extra_delay_steps[1]:
            raise SchemaError(f"timing.extra_delay_steps: must be [lo, hi] with 0 <= lo <= hi, "
                              f"got {self.extra_delay_steps}")
        if self.stale_steps < 0:
            raise SchemaError(f"timing.stale_steps: must be >= 0, got {self.stale_steps}")
        if self.merge not in MERGE_RULES:
            raise SchemaError(f"timing.merge: must be one of {', '.join(MERGE_RULES)}, got "
                              f"{self.merge!r}")
        if self.blend_steps < 1:
            raise SchemaError(f"timing.blend_steps: must be >= 1, got {self.blend_steps}")
        if not 0.0 < self.new_weight <= 1.0:
            raise SchemaError(f"timing.new_weight: must be in (0, 1], got {self.new_weight}")
        check_trigger(self.trigger)
        if not self.trigger_timeout_periods > 0:
            raise SchemaError("timing.trigger_timeout_periods: must be > 0")
        for key in ("state_max_age_periods", "future_skew_s", "command_max_age_s", "decay_s"):
            value = getattr(self, key)
            if not (math.isfinite(value) and value > 0):
                raise SchemaError(f"timing.{key}: must be finite and > 0, got {value}")
        if not (math.isfinite(self.hold_s) and self.hold_s >= 0):
            raise SchemaError(f"timing.hold_s: must be finite and >= 0, got {self.hold_s}")
        check_timing_bounds(self)

    @classmethod
    def build(cls, control_hz: float, latency: LatencyModel, method: str = "edit", *,
              horizon: int = 0, lookahead: int = 2, extra_delay_steps: list[int] | None = None,
              stale_steps: int = -1, blend_steps: int = 0, merge: str = "",
              trigger: str = "clock") -> TimingSpec:
        """Resolve every default (horizon, stale, blend, merge) by the module's rules."""
        extra = list(extra_delay_steps or [0, 0])
        p = latency.planner_period_steps
        blend = resolve_blend_steps(blend_steps, p)
        h = horizon or default_horizon(latency, lookahead, extra[1], method, blend)
        return cls(control_hz=float(control_hz), horizon=int(h), latency=latency,
                   extra_delay_steps=extra, stale_steps=resolve_stale_steps(stale_steps, p),
                   merge=merge or default_merge(method), blend_steps=blend, trigger=trigger)

    # --- derived -----------------------------------------------------------------------
    @property
    def dt(self) -> float:
        """Seconds per step."""
        return 1.0 / self.control_hz

    @property
    def period_steps(self) -> int:
        """Planner period P (steps)."""
        return int(self.latency.planner_period_steps)

    @property
    def max_delay_steps(self) -> int:
        """Largest planner delay (steps) including the extra delay."""
        return max_planner_delay(self.latency, self.extra_delay_steps[1])

    @property
    def state_max_age_s(self) -> float:
        """Oldest state (s, stamp to receipt) the loop accepts."""
        return self.state_max_age_periods / self.control_hz

    @property
    def chunk_max_age_s(self) -> float:
        """Age (s, ``t0`` to now) at which a chunk of ``horizon`` rows is stale (unusable):
        ``(H + stale_steps) * dt``."""
        return usable_steps(self.horizon, self.stale_steps) * self.dt

    @property
    def trigger_timeout_s(self) -> float:
        """``state`` trigger's clock fallback after this long without a state (s)."""
        return self.trigger_timeout_periods / self.control_hz

    # --- per-chunk rules (runtime, time-indexed) ---------------------------------------
    def offset_at(self, t: float, t0: float, dt: float) -> int:
        """Steps of ``dt`` from a chunk's ``t0`` to ``t``."""
        return step_offset(t, t0, dt)

    def row_at(self, t: float, t0: float, dt: float, horizon: int) -> int | None:
        """Row of a chunk ``(t0, dt, horizon)`` for time ``t``; ``None`` once it is stale."""
        offset = step_offset(t, t0, dt)
        if not chunk_usable(offset, horizon, self.stale_steps):
            return None
        return chunk_row(offset, horizon)

    def weights(self, n: int) -> np.ndarray:
        """New-chunk weights for ``n`` overlap rows (:func:`merge_weights`)."""
        return merge_weights(self.merge, n, self.blend_steps, self.new_weight)

    def describe(self) -> str:
        """One line for ``edgerl inspect``."""
        lat = self.latency
        if lat.delay_distribution:
            delay = "D ~ [" + ", ".join(f"{p:.2f}" for p in lat.delay_distribution) + "]"
        else:
            delay = f"D {lat.planner_delay_steps}"
        if lat.delay_jitter_steps:
            delay += f" +- {lat.delay_jitter_steps:g}"
        lo, hi = self.extra_delay_steps
        if hi:
            delay += f" + U{{{lo}..{hi}}}"
        merge = self.merge + (f" over {self.blend_steps}" if self.merge == "blend" else "")
        return (f"{self.control_hz:g} Hz, H {self.horizon}, P {self.period_steps}, {delay} "
                f"(max {self.max_delay_steps}) steps, stale after H+{self.stale_steps}, "
                f"merge {merge}, trigger {self.trigger}")
