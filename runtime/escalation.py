"""``Escalation``: what the loop commands while it has no usable input, step by step.

The ladder (time bounds from the manifest's ``timing``: ``hold_s``, ``decay_s``)::

    input bad for   [0, hold_s)                 -> hold   (repeat the last good command)
                    [hold_s, hold_s + decay_s)  -> decay  (linear from it to the safe action)
                    >= hold_s + decay_s         -> estop  (latched by the safety filter)

"Input bad" is a stale chunk (the planner died or is late beyond its horizon) or a
non-finite observation/network output. A good tick resets the ladder before the e-stop; the
e-stop latches until an operator resets it. With ``stop=False`` (no chunk since the start or
an episode reset: the planner may still be starting) the ladder ends at the safe action and
never latches.

Pure: time is the sum of the ``dt`` the caller passes (the loop's tick spacing, so a
:class:`~edgerl.contract.clock.VirtualClock` drives it in tests); nothing allocates per call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LADDER", "Escalation", "EscalationConfig"]

#: The ladder's steps, in order.
LADDER = ("ok", "hold", "decay", "estop")
#: Summed tick spacings within this many seconds of a bound count as reaching it.
_EPS = 1e-9


@dataclass
class EscalationConfig:
    """Time bounds of the ladder (s): hold ``hold_s``, then decay over ``decay_s``."""

    hold_s: float = 0.2
    decay_s: float = 1.0

    def __post_init__(self) -> None:
        if not (np.isfinite(self.hold_s) and self.hold_s >= 0):
            raise ValueError(f"escalation.hold_s: must be finite and >= 0, got {self.hold_s}")
        if not (np.isfinite(self.decay_s) and self.decay_s > 0):
            raise ValueError(f"escalation.decay_s: must be finite and > 0, got {self.decay_s}")

    @classmethod
    def from_timing(cls, timing: object) -> EscalationConfig:
        """The bounds of a bundle's :class:`~edgerl.contract.timing.TimingSpec`."""
        return cls(hold_s=float(timing.hold_s), decay_s=float(timing.decay_s))  # type: ignore[attr-defined]


class Escalation:
    """One ladder for one action vector.

    Attributes:
        step: Current step (one of :data:`LADDER`).
        bad_s: Seconds the input has been bad (0 while ok).
        entered: How often each step was entered (``{"hold": n, ...}``).
    """

    def __init__(self, cfg: EscalationConfig | None = None) -> None:
        self.cfg = cfg or EscalationConfig()
        self.step = "ok"
        self.bad_s = 0.0
        self.entered = {name: 0 for name in LADDER[1:]}
        self._held: np.ndarray | None = None

    def clear(self) -> None:
        """A good tick: back to ``ok`` (the e-stop itself is latched by the caller)."""
        self.step = "ok"
        self.bad_s = 0.0

    def _enter(self, step: str) -> None:
        if step != self.step:
            self.step = step
            self.entered[step] += 1

    def advance(self, dt: float, last: np.ndarray, safe: np.ndarray, out: np.ndarray,
                stop: bool = True) -> str:
        """One bad tick ``dt`` seconds after the previous one: the ladder's command into
        ``out`` ``(A,)`` from ``last`` (the command sent last tick) and ``safe``; returns the
        step (``estop``: the caller latches its e-stop and sends ``safe``)."""
        if self.step == "ok":
            self.bad_s = 0.0
            if self._held is None or self._held.shape != last.shape:
                self._held = np.empty_like(last)
            np.copyto(self._held, last)  # the command the ladder starts from
        else:
            self.bad_s += max(float(dt), 0.0)
        cfg = self.cfg
        held = self._held
        assert held is not None
        if self.bad_s < cfg.hold_s - _EPS:
            self._enter("hold")
            np.copyto(out, held)
            return self.step
        frac = max(self.bad_s - cfg.hold_s, 0.0) / cfg.decay_s
        if frac < 1.0 - _EPS or not stop:
            self._enter("decay")
            np.subtract(safe, held, out=out)
            np.multiply(out, np.float32(min(frac, 1.0)), out=out)
            np.add(out, held, out=out)
            return self.step
        self._enter("estop")
        np.copyto(out, safe)
        return self.step
