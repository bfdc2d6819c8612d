"""``TimingSpec``: the one place chunk timing is decided, for training and for the robot.

Every rule about *when* a chunk row is used lives here; the sim wrappers
(``edgerl.sim.wrappers.chunk.ChunkScheduler``, ``LatencyWrapper``) and the runtime
(``ChunkBuffer``, ``EditLoop``) call these functions and nothing else computes them (a test
scans the sources). Pure Python/numpy, so the torch-free runtime imports it; the arithmetic
helpers are written with operators only, so they also work elementwise on torch tensors.

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
from typing import Any

import numpy as np

from edgerl.serde import SchemaError

__all__ = [
    "BOUNDARY_EPS",
    "HORIZON_MARGIN",
    "MERGE_RULES",
    "MIN_HORIZON",
    "TRIGGERS",
    "LatencyModel",
    "TimingSpec",
    "blend_active",
    "blend_weight",
    "chunk_row",
    "chunk_usable",
    "default_horizon",
    "default_merge",
    "has_planned_row",
    "inflight_slots",
    "is_newer",
    "max_planner_delay",
    "merge_weights",
    "required_horizon",
    "resolve_blend_steps",
    "resolve_period",
    "resolve_stale_steps",
    "usable_steps",
    "rows_ahead",
    "sampling_delay_steps",
    "step_offset",
]

#: A time within this fraction of a step of a step boundary counts as the next step.
BOUNDARY_EPS = 1e-6
#: Smallest default horizon (rows).
MIN_HORIZON = 8
#: Rows added to the smallest safe horizon by :func:`default_horizon`.
HORIZON_MARGIN = 2
#: Merge rules (``average`` is runtime-only: training never used it).
MERGE_RULES = ("replace", "blend", "average")
#: What makes the edit loop tick.
TRIGGERS = ("clock", "state")


@dataclass
class LatencyModel:
    """The delays the policy was trained with, in control steps (what the sim wrappers used).

    ``planner_delay_steps``: planner inference delay D; ``planner_period_steps``: P;
    ``delay_jitter_steps``: half-width of uniform jitter on D; ``delay_distribution``:
    optional probabilities over D = 0, 1, 2... (fitted from measured serving latency);
    ``edit_delay_steps``: the fast policy's own delay; ``obs_delay_steps`` and
    ``action_delay_steps``: sensor and actuator delays.
    """

    planner_delay_steps: int = 0
    planner_period_steps: int = 1
    delay_jitter_steps: float = 0.0
    delay_distribution: list[float] = field(default_factory=list)
    edit_delay_steps: int = 0
    obs_delay_steps: int = 0
    action_delay_steps: int = 0

    def __post_init__(self) -> None:
        for key in ("planner_delay_steps", "edit_delay_steps", "obs_delay_steps",
                    "action_delay_steps"):
            if getattr(self, key) < 0:
                raise SchemaError(f"latency.{key}: must be >= 0, got {getattr(self, key)}")
        if self.planner_period_steps < 1:
            raise SchemaError("latency.planner_period_steps: must be >= 1")
        if self.delay_jitter_steps < 0:
            raise SchemaError("latency.delay_jitter_steps: must be >= 0")
        if self.delay_distribution:
            total = sum(self.delay_distribution)
            if any(p < 0 for p in self.delay_distribution) or not math.isclose(total, 1.0,
                                                                              abs_tol=1e-6):
                raise SchemaError("latency.delay_distribution: must be probabilities summing to 1")


# --- scalar rules (also elementwise on numpy arrays / torch tensors) ------------------------
def resolve_period(period_steps: int, delay_steps: int) -> int:
    """Planner period P: ``period_steps``, or ``max(1, D)`` when 0."""
    return int(period_steps) or max(1, int(delay_steps))


def max_planner_delay(latency: LatencyModel, extra_max: int = 0) -> int:
    """Largest planner delay D_max (steps) a sampler of ``latency`` can return, with a
    per-episode extra delay of at most ``extra_max`` steps."""
    base = (len(latency.delay_distribution) - 1 if latency.delay_distribution
            else latency.planner_delay_steps)
    return int(base + math.ceil(latency.delay_jitter_steps) + int(extra_max))


def inflight_slots(max_delay: int, period_steps: int) -> int:
    """Planner queries that can be in flight at once: ``D_max // P + 1``."""
    return int(max_delay) // int(period_steps) + 1


def rows_ahead(method: str, lookahead: int, blend_steps: int = 0) -> int:
    """Rows the loop reads past "now": the lookahead; ``blend`` also the blend length."""
    return max(int(lookahead), int(blend_steps)) if method == "blend" else int(lookahead)


def required_horizon(latency: LatencyModel, ahead: int = 0, extra_max: int = 0) -> int:
    """Smallest chunk horizon that never runs out between arrivals: a chunk queried at k
    arrives at k + D and serves until the next one arrives, at the latest k + P + D_max, and
    the loop reads ``ahead`` rows further: ``H >= P + D_max + ahead``."""
    return latency.planner_period_steps + max_planner_delay(latency, extra_max) + int(ahead)


def default_horizon(latency: LatencyModel, lookahead: int, extra_max: int = 0,
                    method: str = "edit", blend_steps: int = 0) -> int:
    """The horizon used when none is given:
    ``max(MIN_HORIZON, P + D_max + rows_ahead + HORIZON_MARGIN)``."""
    blend = resolve_blend_steps(blend_steps, latency.planner_period_steps)
    ahead = rows_ahead(method, lookahead, blend)
    return max(MIN_HORIZON, required_horizon(latency, ahead, extra_max) + HORIZON_MARGIN)


def resolve_stale_steps(stale_steps: int, period_steps: int) -> int:
    """Steps past the last row a chunk stays usable: ``stale_steps``, or P when < 0."""
    return int(period_steps) if stale_steps < 0 else int(stale_steps)


def resolve_blend_steps(blend_steps: int, period_steps: int) -> int:
    """Blend length B: ``blend_steps``, or P when 0."""
    return int(blend_steps) or int(period_steps)


def default_merge(method: str) -> str:
    """``blend`` for ``blend`` bundles, ``replace`` for every other method."""
    return "blend" if method == "blend" else "replace"


def sampling_delay_steps(trigger: str) -> int:
    """Extra observation delay (steps) the trigger adds: ``clock`` reads a state up to a
    period old (modelled as one step), ``state`` ticks on the state itself (0)."""
    _check_trigger(trigger)
    return 1 if trigger == "clock" else 0


def step_offset(t: float, t0: float, dt: float) -> int:
    """Whole steps from ``t0`` to ``t`` (``t0 + i*dt`` counts as step ``i`` despite rounding)."""
    return math.floor((t - t0) / dt + BOUNDARY_EPS)


def chunk_row(offset: Any, horizon: int) -> Any:
    """Row executed at ``offset`` steps after ``step0``: ``clip(offset, 0, H - 1)``."""
    if isinstance(offset, (int, np.integer)):
        return min(max(int(offset), 0), horizon - 1)
    return offset.clip(0, horizon - 1)


def usable_steps(horizon: Any, stale_steps: int) -> Any:
    """Steps from a chunk's first row for which it is usable: ``H + stale_steps`` (int or an
    integer array of horizons)."""
    return horizon + stale_steps


def chunk_usable(offset: Any, horizon: int, stale_steps: int) -> Any:
    """Whether a chunk is still usable ``offset`` steps after its ``step0``:
    ``offset < H + stale_steps`` (bool or a bool array/tensor)."""
    return offset < usable_steps(horizon, stale_steps)


def is_newer(new_start: Any, cur_start: Any) -> Any:
    """An arrived chunk replaces the current one only if it was planned later
    (``step0`` or ``t0``; a late chunk overtaken by a newer one is dropped)."""
    return new_start > cur_start


def blend_weight(since: Any, blend_steps: int) -> Any:
    """New-chunk weight ``(k + 1) / (B + 1)`` at the ``k = since``-th step after arrival."""
    return (since + 1) / (blend_steps + 1)


def has_planned_row(offset: Any, horizon: int) -> Any:
    """Whether a chunk has a planned row ``offset`` steps after its ``step0`` (not the held
    last row): ``offset < H``."""
    return offset < horizon


def blend_active(since: Any, blend_steps: int, old_offset: Any, old_horizon: int) -> Any:
    """Blend while ``since < B`` and the replaced chunk still has a planned row (never its
    held last row, which is older than anything it planned)."""
    return (since < blend_steps) & has_planned_row(old_offset, old_horizon)


def merge_weights(rule: str, n: int, blend_steps: int, new_weight: float = 0.5) -> np.ndarray:
    """New-chunk weights ``(n,)`` float32 for the ``n`` overlapping rows counted from the
    arrival step (see :func:`blend_weight`); 1 where the new chunk is used alone."""
    if rule not in MERGE_RULES:
        raise ValueError(f"merge rule {rule!r} is not one of {', '.join(MERGE_RULES)}")
    k = np.arange(n, dtype=np.float64)
    if rule == "replace":
        return np.ones(n, np.float32)
    if rule == "average":
        return np.full(n, new_weight, np.float32)
    if blend_steps < 1:
        raise ValueError("blend needs blend_steps >= 1")
    w = np.where(blend_active(k, blend_steps, 0, 1), blend_weight(k, blend_steps), 1.0)
    return w.astype(np.float32)


def _check_trigger(trigger: str) -> None:
    if trigger not in TRIGGERS:
        raise SchemaError(f"timing.trigger: must be one of {', '.join(TRIGGERS)}, got "
                          f"{trigger!r}")


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
        _check_trigger(self.trigger)
        if not self.trigger_timeout_periods > 0:
            raise SchemaError("timing.trigger_timeout_periods: must be > 0")
        for key in ("state_max_age_periods", "future_skew_s", "command_max_age_s", "decay_s"):
            value = getattr(self, key)
            if not (math.isfinite(value) and value > 0):
                raise SchemaError(f"timing.{key}: must be finite and > 0, got {value}")
        if not (math.isfinite(self.hold_s) and self.hold_s >= 0):
            raise SchemaError(f"timing.hold_s: must be finite and >= 0, got {self.hold_s}")

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
