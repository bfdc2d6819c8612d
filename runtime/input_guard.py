"""``InputGuard``: stamp, size and value bounds for every input the runtime receives.

Each ``check_*`` returns ``None`` (use it) or a drop reason ``"<kind>: <detail>"``, and
counts the drop under ``<input> <kind>`` (:meth:`InputGuard.counts`). The bounds come from the
bundle's manifest (``timing``, ``chunk``, ``action``):

================  ==========================================================================
input             dropped when (kind)
================  ==========================================================================
state             no stamp (``no_stamp``); older than ``timing.state_max_age_s``
                  (``stale``); stamped more than ``timing.future_skew_s`` ahead (``future``)
chunk             more rows than ``timing.horizon`` (``too_long``); wrong column count, or
                  a planner intent whose size is not ``edit_obs.intent_dim``
                  (``wrong_dim``; a chunk without an intent is accepted: the loop reads
                  zeros); row spacing outside ``[0.5, 2] * chunk.dt_s`` (``bad_dt``);
                  observation stamp or ``t0`` more than ``future_skew_s`` ahead (``future``);
                  already stale on arrival, ``now - t0 >= (H + stale_steps) * dt``
                  (``stale``); a value that is not finite (``nonfinite``) or more than
                  ``CHUNK_LIMIT_SPANS`` range widths outside ``[low, high]``
                  (``out_of_limits``; a planner's overshoot is clipped later, 1e6 is not an
                  action)
command           no stamp (``no_stamp``); stamp older than ``timing.command_max_age_s``
                  (``stale``) or ahead by more than ``future_skew_s`` (``future``); wrong
                  size (``wrong_dim``); non-finite (``nonfinite``); outside ``[low, high]``
                  beyond a float32 rounding tolerance (``out_of_limits``)
================  ==========================================================================

Times are seconds on one clock shared by stamp and ``now`` (the caller picks it: ROS wall
time, or the monotonic clock). Pure numpy; thread-safe counters.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from dataclasses import dataclass

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.spec import PolicySpec

__all__ = ["CHUNK_LIMIT_SPANS", "DROP_KINDS", "DT_FACTOR", "GuardBounds", "InputGuard"]

#: Reason kinds a check can return (the text before the ``:``).
DROP_KINDS = ("no_stamp", "stale", "future", "too_long", "wrong_dim", "bad_dt", "nonfinite",
              "out_of_limits")
#: A chunk row spacing is accepted within this factor of the manifest's ``chunk.dt_s``.
DT_FACTOR = 2.0
#: Chunk values may overshoot ``[low, high]`` by this many range widths (untrained or
#: unsquashed planners overshoot; the safety filter clips the command).
CHUNK_LIMIT_SPANS = 10.0


@dataclass
class GuardBounds:
    """The numbers the checks compare against (see the module table).

    Attributes:
        state_max_age_s: Oldest state accepted (s).
        future_skew_s: Largest stamp lead over ``now`` accepted (s).
        command_max_age_s: Oldest command accepted (s).
        max_rows: Largest chunk (rows).
        chunk_dt_s: The manifest's chunk row spacing (s).
        chunk_max_age_s: A chunk this old (``t0`` to now, s) is stale.
        low: ``(A,)`` action lower limits.
        high: ``(A,)`` action upper limits.
        intent_dim: The planner intent size a chunk may carry (the manifest's
            ``edit_obs.intent_dim``; 0: none).
    """

    state_max_age_s: float
    future_skew_s: float
    command_max_age_s: float
    max_rows: int
    chunk_dt_s: float
    chunk_max_age_s: float
    low: np.ndarray
    high: np.ndarray
    intent_dim: int = 0

    @classmethod
    def from_spec(cls, spec: PolicySpec) -> GuardBounds:
        """The bounds of a bundle's manifest."""
        t = spec.timing
        return cls(state_max_age_s=t.state_max_age_s, future_skew_s=t.future_skew_s,
                   command_max_age_s=t.command_max_age_s, max_rows=int(t.horizon),
                   chunk_dt_s=float(spec.chunk.dt_s), chunk_max_age_s=t.chunk_max_age_s,
                   low=np.asarray(spec.action.low, np.float64),
                   high=np.asarray(spec.action.high, np.float64),
                   intent_dim=int(spec.edit_obs.intent_dim))


def _inside(values: list[float], bounds: list[tuple[float, float]]) -> bool:
    """Whether every value is finite and within its ``(low, high)``: the fast path of
    :meth:`InputGuard.check_command` (Python floats compare exactly as numpy's float64 does;
    NaN fails the comparisons, an inf the sum). False sends it to the exact checks that name
    the problem."""
    return (all(lo <= v <= hi for v, (lo, hi) in zip(values, bounds))
            and math.isfinite(sum(values)))


class InputGuard:
    """Checks states, chunks and commands against :class:`GuardBounds`; counts drops.

    Args:
        bounds: A :class:`GuardBounds`, or a :class:`~edgerl.contract.spec.PolicySpec` to take them
            from.
    """

    def __init__(self, bounds: GuardBounds | PolicySpec) -> None:
        self.bounds = bounds if isinstance(bounds, GuardBounds) else GuardBounds.from_spec(bounds)
        b = self.bounds
        span = b.high - b.low
        self._chunk_low = b.low - CHUNK_LIMIT_SPANS * span
        self._chunk_high = b.high + CHUNK_LIMIT_SPANS * span
        tol = 1e-6 * np.maximum(np.abs(b.low), np.abs(b.high)) + 1e-6  # float32 round trip
        self._cmd_low, self._cmd_high = b.low - tol, b.high + tol
        self._cmd_bounds = list(zip(self._cmd_low.tolist(), self._cmd_high.tolist()))
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    # --- counters ----------------------------------------------------------------------
    def _drop(self, what: str, reason: str) -> str:
        with self._lock:
            self._counts[f"{what} {reason.split(':')[0]}"] += 1
        return reason

    def counts(self) -> dict[str, int]:
        """Drops by ``"<input> <kind>"`` (``"chunk too_long": 3``)."""
        with self._lock:
            return dict(self._counts)

    @property
    def total(self) -> int:
        """All drops."""
        with self._lock:
            return sum(self._counts.values())

    # --- shared rules ------------------------------------------------------------------
    def _stamp(self, what: str, stamp: float | None, now: float, max_age: float) -> str | None:
        if stamp is None or not math.isfinite(stamp):
            return self._drop(what, "no_stamp: the stamp is zero or missing")
        age = now - stamp
        if age > max_age:
            return self._drop(what, f"stale: stamped {age:.3g} s ago (bound {max_age:.3g} s)")
        if -age > self.bounds.future_skew_s:
            return self._drop(what, f"future: stamped {-age:.3g} s ahead (bound "
                                    f"{self.bounds.future_skew_s:.3g} s)")
        return None

    def _values(self, what: str, values: np.ndarray, low: np.ndarray, high: np.ndarray
                ) -> str | None:
        finite = np.isfinite(values)
        if not finite.all():
            i = int(np.argmin(finite.ravel()))
            return self._drop(what, f"nonfinite: value {i} is {values.ravel()[i]}")
        bad = (values < low) | (values > high)
        if bad.any():
            i = int(np.argmax(bad.ravel()))
            col = i % low.shape[0]
            return self._drop(what, f"out_of_limits: value {i} = {values.ravel()[i]:.6g} "
                                    f"outside [{low[col]:.6g}, {high[col]:.6g}]")
        return None

    # --- checks ------------------------------------------------------------------------
    def check_state(self, stamp: float | None, now: float) -> str | None:
        """A robot state stamped ``stamp`` (``None``: no stamp) received at ``now`` (s)."""
        return self._stamp("state", stamp, now, self.bounds.state_max_age_s)

    def check_chunk_rows(self, rows: int) -> str | None:
        """The cheap size check, before a chunk message is even converted."""
        if rows > self.bounds.max_rows:
            return self._drop("chunk", f"too_long: {rows} rows, the manifest's horizon is "
                                       f"{self.bounds.max_rows}")
        return None

    def check_chunk(self, chunk: ActionChunk, now: float) -> str | None:
        """An :class:`ActionChunk` (times on ``now``'s clock) received at ``now`` (s)."""
        b = self.bounds
        reason = self.check_chunk_rows(chunk.horizon)
        if reason is not None:
            return reason
        if chunk.action_dim != b.low.shape[0]:
            return self._drop("chunk", f"wrong_dim: {chunk.action_dim} columns, the manifest "
                                       f"has {b.low.shape[0]} actions")
        if chunk.intent is not None and chunk.intent_dim != b.intent_dim:
            return self._drop("chunk", f"wrong_dim: an intent of {chunk.intent_dim} values, "
                                       f"the manifest's edit_obs.intent_dim is {b.intent_dim}")
        if chunk.horizon > 1 and not b.chunk_dt_s / DT_FACTOR <= chunk.dt <= b.chunk_dt_s \
                * DT_FACTOR:
            return self._drop("chunk", f"bad_dt: rows {chunk.dt:.6g} s apart, the manifest's "
                                       f"chunk.dt_s is {b.chunk_dt_s:.6g}")
        ref = chunk.obs_time if np.isfinite(chunk.obs_time) else chunk.t0
        lead = max(ref, chunk.t0) - now
        if lead > b.future_skew_s:
            return self._drop("chunk", f"future: stamped {lead:.3g} s ahead (bound "
                                       f"{b.future_skew_s:.3g} s)")
        age = now - chunk.t0
        if age >= b.chunk_max_age_s:
            return self._drop("chunk", f"stale: t0 {age:.3g} s ago, stale after "
                                       f"{b.chunk_max_age_s:.3g} s")
        return self._values("chunk", chunk.actions, self._chunk_low, self._chunk_high)

    def check_command(self, values: np.ndarray, stamp: float | None, now: float) -> str | None:
        """A command ``(A,)`` stamped ``stamp`` (the state it answers; ``None``: no stamp)
        received at ``now`` (s)."""
        reason = self._stamp("command", stamp, now, self.bounds.command_max_age_s)
        if reason is not None:
            return reason
        values = np.asarray(values)
        if values.shape != self.bounds.low.shape:
            return self._drop("command", f"wrong_dim: {values.shape} values, the manifest has "
                                         f"{self.bounds.low.shape[0]} actions")
        if _inside(values.tolist(), self._cmd_bounds):  # every tick of a composed node
            return None
        return self._values("command", values, self._cmd_low, self._cmd_high)
