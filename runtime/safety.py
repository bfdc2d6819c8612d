"""``SafetyFilter``: the last step before a command leaves the runtime.

Every command passes :meth:`SafetyFilter.filter`: non-finite guard, per-element limits
(``PolicySpec.action.low/high``) and rate limits (``action.max_rate`` units/s). When the
loop has no usable action (no chunk yet, stale chunk, non-finite observation, deadline
overrun, e-stop) it asks :meth:`SafetyFilter.fallback` for the command of the configured
policy instead:

* ``hold``: repeat the last command sent;
* ``decelerate``: move the last command toward the safe action with time constant
  ``decel_tau_s`` (first order: ``u += (safe - u) * min(1, dt / tau)``);
* ``zero``: the safe action (zeros clipped into ``[low, high]``, or ``safe_action``);
* ``escalate`` (the default for stale chunks and non-finite input): the ladder of
  :mod:`edgerl.runtime.escalation` -- hold for ``hold_s``, decay linearly to the safe action
  over ``decay_s``, then latch the e-stop (the bounds come from the manifest's ``timing``).
  Without any chunk since the start/reset (``no_chunk``) the ladder stops at the safe action.

The e-stop latches: once triggered (by the caller, by ``max_consecutive_overruns`` or
``max_consecutive_nonfinite``) every command is the safe action until :meth:`reset_estop`.
Every intervention is counted by reason (:data:`REASONS`); nothing allocates per call.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

import numpy as np

from edgerl.contract.spec import ActionSpec
from edgerl.runtime.escalation import Escalation, EscalationConfig

__all__ = ["FALLBACK_POLICIES", "REASONS", "STALE_POLICIES", "SafetyConfig", "SafetyFilter",
           "all_finite"]


def all_finite(x: np.ndarray) -> bool:
    """Whether every element of the float32 array ``x`` is finite: the sum of its elements as
    Python floats (doubles) is finite exactly then (a float32 is exact in a double, and fewer
    than 2**800 of them cannot overflow its range; inf and NaN propagate without a warning).
    ~10x faster than ``np.isfinite(x).all()`` on the few elements of a tick."""
    return math.isfinite(sum(x.tolist()))

log = logging.getLogger(__name__)

#: Fallback command policies.
FALLBACK_POLICIES = ("escalate", "hold", "decelerate", "zero")
#: Stale/no-chunk policies: a fallback, or ``policy`` = what training did (the network runs
#: with ``has_chunk = 0`` on zero chunk rows; ``planner``/``rtc`` command the zero row).
STALE_POLICIES = (*FALLBACK_POLICIES, "policy")
#: Intervention reasons, in counter order.
REASONS = ("clip", "rate_limit", "nonfinite_action", "nonfinite_obs", "no_chunk",
           "stale_chunk", "deadline_overrun", "transport_down", "estop")
_R = {name: i for i, name in enumerate(REASONS)}


@dataclass
class SafetyConfig:
    """Fallback policies and latch thresholds.

    Attributes:
        stale_policy: Command when there is no chunk yet or the chunk is stale (one of
            :data:`STALE_POLICIES`).
        nonfinite_policy: Command when the observation or the network output is NaN/inf.
        overrun_policy: Command for a tick that starts after its deadline was missed by more
            than a period (``"compute"`` keeps computing normally and only counts).
        decel_tau_s: Time constant of ``decelerate`` (s).
        safe_action: The ``zero``/e-stop command; default zeros clipped into the limits.
        max_consecutive_overruns: Overrun ticks in a row that latch the e-stop (0 = never).
        max_consecutive_nonfinite: Non-finite ticks in a row that latch the e-stop (0 = never).
    """

    stale_policy: str = "escalate"
    nonfinite_policy: str = "escalate"
    overrun_policy: str = "compute"
    decel_tau_s: float = 0.2
    safe_action: list[float] = field(default_factory=list)
    max_consecutive_overruns: int = 0
    max_consecutive_nonfinite: int = 0

    def __post_init__(self) -> None:
        if self.stale_policy not in STALE_POLICIES:
            raise ValueError(f"safety.stale_policy: {self.stale_policy!r} is not one of "
                             f"{', '.join(STALE_POLICIES)}")
        if self.nonfinite_policy not in FALLBACK_POLICIES:
            raise ValueError(f"safety.nonfinite_policy: {self.nonfinite_policy!r} is not one "
                             f"of {', '.join(FALLBACK_POLICIES)}")
        if self.overrun_policy not in (*FALLBACK_POLICIES, "compute"):
            raise ValueError(f"safety.overrun_policy: {self.overrun_policy!r} is not one of "
                             f"compute, {', '.join(FALLBACK_POLICIES)}")
        if not self.decel_tau_s > 0:
            raise ValueError(f"safety.decel_tau_s: must be > 0, got {self.decel_tau_s}")


class SafetyFilter:
    """Limits, rate limits, fallbacks and the e-stop latch for one action vector.

    Args:
        action: The manifest's action spec (limits, max_rate).
        cfg: Fallback policies and thresholds.
        escalation: Time bounds of the ``escalate`` ladder (the manifest's
            ``timing.hold_s``/``decay_s``; default :class:`EscalationConfig`).
    """

    def __init__(self, action: ActionSpec, cfg: SafetyConfig | None = None,
                 escalation: EscalationConfig | None = None) -> None:
        self.cfg = cfg or SafetyConfig()
        self.escalation = Escalation(escalation)
        self.low = np.asarray(action.low, dtype=np.float32)
        self.high = np.asarray(action.high, dtype=np.float32)
        rate = np.asarray(action.max_rate, dtype=np.float32)
        self.max_rate = np.where(rate > 0, rate, np.float32(np.inf)).astype(np.float32)
        self.has_rate = bool(np.any(rate > 0))
        dim = self.low.shape[0]
        if self.cfg.safe_action:
            safe = np.asarray(self.cfg.safe_action, dtype=np.float32)
            if safe.shape != (dim,):
                raise ValueError(f"safety.safe_action: needs {dim} elements, got {safe.shape}")
            if np.any(safe < self.low) or np.any(safe > self.high):
                raise ValueError("safety.safe_action: must lie inside action.low/high")
        else:
            safe = np.clip(np.zeros(dim, np.float32), self.low, self.high)
        self.safe = safe
        self.last = safe.copy()  # last command sent (hold / rate-limit reference)
        self._tmp = np.zeros(dim, np.float32)
        self._mask = np.zeros(dim, bool)
        self._abs = np.zeros(dim, np.float32)
        self.counts = [0] * len(REASONS)
        self.estopped = False
        self.estop_reason = ""
        self._overruns_in_row = 0
        self._nonfinite_in_row = 0

    # --- counters --------------------------------------------------------------------------
    def count(self, reason: str) -> None:
        """Count one intervention (``reason`` in :data:`REASONS`)."""
        self.counts[_R[reason]] += 1

    def reset_counts(self) -> None:
        """Zero the intervention counters (e.g. after a warm-up)."""
        self.counts = [0] * len(REASONS)

    def interventions(self) -> dict[str, int]:
        """Counts by reason."""
        return dict(zip(REASONS, self.counts))

    # --- e-stop ----------------------------------------------------------------------------
    def estop(self, reason: str = "requested") -> None:
        """Latch the e-stop: every later command is the safe action until reset."""
        if not self.estopped:
            log.warning("e-stop latched: %s", reason)
        self.estopped = True
        self.estop_reason = reason

    def reset_estop(self) -> None:
        """Release the latch (an operator decision); the next command is rate-limited from
        the safe action."""
        self.estopped = False
        self.estop_reason = ""
        self._overruns_in_row = 0
        self._nonfinite_in_row = 0
        self.escalation.clear()

    def reset(self) -> None:
        """Start of a run: the last command is the safe action, the escalation ladder is back
        at ``ok`` (counters are kept)."""
        np.copyto(self.last, self.safe)
        self.escalation.clear()

    # --- the filter ------------------------------------------------------------------------
    def filter(self, action: np.ndarray, dt: float, out: np.ndarray) -> np.ndarray:
        """Guard, clip and rate-limit ``action`` ``(A,)`` into ``out``; records it as sent.

        ``dt``: seconds since the previous command (for the rate limit).
        """
        if self.estopped:
            self.count("estop")
            np.copyto(out, self.safe)
            np.copyto(self.last, out)
            return out
        if not all_finite(action):
            self.count("nonfinite_action")
            return self.fallback(self.cfg.nonfinite_policy, dt, out, nonfinite=True)
        self._nonfinite_in_row = 0
        self.escalation.clear()
        np.maximum(action, self.low, out=out)
        np.minimum(out, self.high, out=out)
        if out.tolist() != action.tolist():  # finite here: exact as Python floats
            self.count("clip")
        if self.has_rate:
            self._rate_limit(out, dt)
        np.copyto(self.last, out)
        return out

    def _rate_limit(self, out: np.ndarray, dt: float) -> None:
        step = self._tmp
        np.multiply(self.max_rate, np.float32(max(dt, 0.0)), out=step)
        np.subtract(out, self.last, out=out)  # out = delta
        np.absolute(out, out=self._abs)
        np.greater(self._abs, step, out=self._mask)
        if self._mask.any():
            self.count("rate_limit")
            np.minimum(out, step, out=out)
            np.negative(step, out=step)
            np.maximum(out, step, out=out)
        np.add(out, self.last, out=out)

    def fallback(self, policy: str, dt: float, out: np.ndarray, *, nonfinite: bool = False,
                 reason: str = "", latch: bool = True) -> np.ndarray:
        """The command of fallback ``policy`` into ``out`` (and counted under ``reason`` if
        given); records it as sent. ``latch=False`` (no input has ever arrived: the robot or
        planner is still starting) never latches the e-stop: the ladder ends at the safe
        action."""
        if reason:
            self.count(reason)
        if nonfinite and latch:
            self._nonfinite_in_row += 1
            limit = self.cfg.max_consecutive_nonfinite
            if limit and self._nonfinite_in_row >= limit:
                self.estop(f"{self._nonfinite_in_row} non-finite ticks in a row")
        if self.estopped:
            self.count("estop")
            np.copyto(out, self.safe)
        elif policy == "escalate":
            step = self.escalation.advance(dt, self.last, self.safe, out,
                                           stop=latch and reason != "no_chunk")
            if step == "estop":
                self.estop(f"escalation: no usable input for {self.escalation.bad_s:.3g} s "
                           f"({reason or 'nonfinite'})")
        elif policy == "hold":
            np.copyto(out, self.last)
        elif policy == "zero":
            np.copyto(out, self.safe)
        else:  # decelerate
            alpha = np.float32(min(1.0, max(dt, 0.0) / self.cfg.decel_tau_s))
            np.subtract(self.safe, self.last, out=out)
            np.multiply(out, alpha, out=out)
            np.add(out, self.last, out=out)
        np.copyto(self.last, out)
        return out

    def note_overrun(self, overrun: bool) -> None:
        """Tell the filter whether this tick overran; may latch the e-stop."""
        if not overrun:
            self._overruns_in_row = 0
            return
        self.count("deadline_overrun")
        self._overruns_in_row += 1
        limit = self.cfg.max_consecutive_overruns
        if limit and self._overruns_in_row >= limit:
            self.estop(f"{self._overruns_in_row} deadline overruns in a row")
