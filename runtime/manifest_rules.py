"""Semantic bounds of a manifest: well-typed values that no robot should run.

The schema (:mod:`edgerl.contract.spec`) checks types and internal consistency (``low < high``,
``std > 0``, timing matches ``chunk``). :func:`check_manifest_values` adds the bounds below;
each violation is a :class:`~edgerl.contract.bundle_errors.ManifestValueError` whose message starts
with the field's dotted path. The defaults (:class:`ManifestLimits`) are wide enough for every
edgerl task and the Gym/MuJoCo adapters (the largest action limit there is 3) and for the
fastest loop measured (1 kHz); a robot outside them passes its own ``ManifestLimits``.

=================================  ===================================================
field                              rule (default limits)
=================================  ===================================================
control_hz                         0.1 <= control_hz <= 10,000 Hz
action.low / action.high           \\|value\\| <= 100 (action units)
action.max_rate                    0 <= max_rate <= 1e6 units/s (0 = unlimited)
residual_bound                     0 <= residual_bound <= max(high - low)
observation.mean / .std            \\|mean\\| <= 1e6; 1e-6 <= std <= 1e6
chunk.horizon                      1 <= horizon <= 1,000 rows
chunk.dt_s                         1e-4 s <= dt_s <= 10 s
chunk (horizon * dt_s)             <= 60 s
chunk.period_s                     <= 60 s
chunk.expected_latency_s           <= 60 s
latency.*_steps, timing.*_steps    <= 10,000 steps
edit_obs.lookahead                 <= chunk.horizon
edit_obs.n_committed               <= 1,000
observation / action size          <= 100,000 / 1,000 elements
recurrent.state_shapes             every dim 1..65,536; <= 1e6 elements per state
=================================  ===================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from edgerl.contract.bundle_errors import ManifestValueError
from edgerl.contract.spec import PolicySpec

__all__ = ["ManifestLimits", "check_manifest_values"]


@dataclass(frozen=True)
class ManifestLimits:
    """The bounds :func:`check_manifest_values` enforces (see the module table)."""

    min_control_hz: float = 0.1
    max_control_hz: float = 10_000.0
    max_abs_action: float = 100.0
    max_rate: float = 1e6
    max_abs_obs_mean: float = 1e6
    min_obs_std: float = 1e-6
    max_obs_std: float = 1e6
    max_horizon: int = 1_000
    min_chunk_dt_s: float = 1e-4
    max_chunk_dt_s: float = 10.0
    max_chunk_span_s: float = 60.0
    max_period_s: float = 60.0
    max_steps: int = 10_000
    max_committed: int = 1_000
    max_obs_dim: int = 100_000
    max_action_dim: int = 1_000
    max_state_dim: int = 65_536
    max_state_elements: int = 1_000_000


def _within(field: str, value: float, lo: float, hi: float, unit: str = "") -> None:
    if not lo <= value <= hi:
        raise ManifestValueError(f"{field}: {value!r} is outside the accepted range "
                                 f"[{lo:g}, {hi:g}]{unit}")


def _each(field: str, values: list[float], lo: float, hi: float, unit: str = "") -> None:
    for i, v in enumerate(values):
        _within(f"{field}[{i}]", v, lo, hi, unit)


def check_manifest_values(spec: PolicySpec, limits: ManifestLimits | None = None) -> None:
    """Raise :class:`ManifestValueError` naming the first field outside ``limits``."""
    lim = limits or ManifestLimits()
    _within("control_hz", spec.control_hz, lim.min_control_hz, lim.max_control_hz, " Hz")
    _within("observation.names (size)", spec.observation.dim, 1, lim.max_obs_dim)
    _within("action.names (size)", spec.action.dim, 1, lim.max_action_dim)
    act = spec.action
    _each("action.low", act.low, -lim.max_abs_action, lim.max_abs_action)
    _each("action.high", act.high, -lim.max_abs_action, lim.max_abs_action)
    for i, (lo, hi) in enumerate(zip(act.low, act.high)):
        if not lo < hi:
            raise ManifestValueError(f"action.low[{i}]: {lo!r} is not below action.high[{i}] "
                                     f"({hi!r})")
    _each("action.max_rate", act.max_rate, 0.0, lim.max_rate, " units/s (0 = unlimited)")
    span = max(hi - lo for lo, hi in zip(act.low, act.high))
    _within("residual_bound", spec.residual_bound, 0.0, span)
    _each("observation.mean", spec.observation.mean, -lim.max_abs_obs_mean,
          lim.max_abs_obs_mean)
    _each("observation.std", spec.observation.std, lim.min_obs_std, lim.max_obs_std)
    c = spec.chunk
    _within("chunk.horizon", c.horizon, 1, lim.max_horizon, " rows")
    _within("chunk.dt_s", c.dt_s, lim.min_chunk_dt_s, lim.max_chunk_dt_s, " s")
    _within("chunk (horizon * dt_s)", c.horizon * c.dt_s, 0.0, lim.max_chunk_span_s, " s")
    _within("chunk.period_s", c.period_s, 0.0, lim.max_period_s, " s")
    _within("chunk.expected_latency_s", c.expected_latency_s, 0.0, lim.max_period_s, " s")
    lat = spec.latency
    for key in ("planner_delay_steps", "planner_period_steps", "edit_delay_steps",
                "obs_delay_steps", "action_delay_steps", "delay_jitter_steps"):
        _within(f"latency.{key}", getattr(lat, key), 0, lim.max_steps, " steps")
    _within("latency.delay_distribution (size)", len(lat.delay_distribution), 0,
            lim.max_steps)
    t = spec.timing
    if t is not None:
        for key in ("stale_steps", "blend_steps"):
            _within(f"timing.{key}", getattr(t, key), 0, lim.max_steps, " steps")
        _each("timing.extra_delay_steps", t.extra_delay_steps, 0, lim.max_steps, " steps")
        _within("timing.trigger_timeout_periods", t.trigger_timeout_periods, 0.0,
                lim.max_steps)
    eo = spec.edit_obs
    _within("edit_obs.lookahead", eo.lookahead, 0, c.horizon, " rows (at most chunk.horizon)")
    _within("edit_obs.n_committed", eo.n_committed, 0, lim.max_committed)
    _within("edit_obs.age_scale_s", eo.age_scale_s, 1e-6, 1e6, " s")
    _within("edit_obs.age_clip", eo.age_clip, 1e-6, 1e6)
    for i, shape in enumerate(spec.recurrent.state_shapes):
        n = 1
        for j, d in enumerate(shape):
            _within(f"recurrent.state_shapes[{i}][{j}]", d, 1, lim.max_state_dim)
            n *= d
        _within(f"recurrent.state_shapes[{i}] (elements)", n, 1, lim.max_state_elements)
