"""The timing rules as plain functions, and the latency model they read.

Each rule of :mod:`edgerl.contract.timing` (delay, horizon, adoption, row and stale, merge, trigger;
the module doc there states them) is one function here, and :class:`LatencyModel` holds the
delays a policy was trained with. :class:`edgerl.contract.timing.TimingSpec` applies them to one
bundle; import them from :mod:`edgerl.contract.timing`, the timing contract's public module. Pure
Python/numpy; the arithmetic helpers use operators only, so they also work elementwise on
numpy arrays and torch tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgerl.contract.serde import SchemaError

__all__ = [
    "BOUNDARY_EPS",
    "HORIZON_MARGIN",
    "MERGE_RULES",
    "MIN_HORIZON",
    "TRIGGERS",
    "LatencyModel",
    "blend_active",
    "blend_weight",
    "oldest_chunk_age",
    "check_trigger",
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


def oldest_chunk_age(latency: LatencyModel, extra_max: int = 0) -> int:
    """The oldest (steps) a chunk's planner observation gets before the next chunk arrives:
    the largest planner delay plus the period (a planner intent is read that old at most)."""
    return max_planner_delay(latency, extra_max) + int(latency.planner_period_steps)


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
    check_trigger(trigger)
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


def check_trigger(trigger: str) -> None:
    """Raise :class:`SchemaError` unless ``trigger`` is one of :data:`TRIGGERS`."""
    if trigger not in TRIGGERS:
        raise SchemaError(f"timing.trigger: must be one of {', '.join(TRIGGERS)}, got "
                          f"{trigger!r}")
