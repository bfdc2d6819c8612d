"""Operator interventions: the record, its validation, and the slot the fast loop reads.

An operator (a person at a teleop console, or the scripted stand-in of
:mod:`edgerl.hil.operator`) takes over the robot with ``override`` (a command ``(A,)`` in
action units that replaces the policy's until ``release``) or stops it with ``estop`` (the
runtime's e-stop latch, released only by the usual ``reset_estop``). Each record is stamped on
the monotonic clock of the machine running the loop.

RLIF (Luo et al. 2023) uses the moment an operator takes over as the (negative) reward: an
``override`` that starts while none is active is an *intervention start*.

Wire forms: ROS 2 ``operator/intervention`` as ``sensor_msgs/JointState`` (``header.stamp``,
``name = [kind]``, ``position = command``); HIL: the harness calls
:meth:`InterventionSlot.push` from its operator thread.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

import numpy as np

__all__ = ["KINDS", "Intervention", "InterventionError", "InterventionSlot",
           "validate_intervention"]

#: Intervention kinds.
KINDS = ("override", "estop", "release")


class InterventionError(ValueError):
    """An intervention record that cannot be applied (the message names the problem;
    ``reason`` is a short code for counters: kind, stamp, future, stale, shape, nonfinite)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Intervention:
    """One operator action.

    Attributes:
        kind: ``override``, ``estop`` or ``release``.
        stamp_s: When the operator issued it (monotonic s, the loop's clock).
        command: ``(A,)`` float32 command for ``override`` (action units); empty otherwise.
    """

    kind: str
    stamp_s: float
    command: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))


def validate_intervention(iv: Intervention, action_dim: int, now: float,
                          max_age_s: float = 0.5, max_future_s: float = 0.01) -> None:
    """Raise :class:`InterventionError` unless ``iv`` can be applied at ``now`` (s).

    Checks: a known kind; a finite stamp not later than ``now + max_future_s`` (clock skew
    allowance) and not older than ``max_age_s``; ``override`` carries exactly ``action_dim``
    finite values; ``estop``/``release`` carry none.
    """
    if iv.kind not in KINDS:
        raise InterventionError(f"intervention kind {iv.kind!r} is not one of {', '.join(KINDS)}",
                                "kind")
    if not math.isfinite(iv.stamp_s):
        raise InterventionError(f"intervention stamp {iv.stamp_s} is not finite", "stamp")
    if iv.stamp_s > now + max_future_s:
        raise InterventionError(f"intervention stamp {iv.stamp_s:.6f} s is "
                                f"{iv.stamp_s - now:.3f} s in the future (now {now:.6f} s): "
                                "clocks not synchronized?", "future")
    if now - iv.stamp_s > max_age_s:
        raise InterventionError(f"intervention is stale: stamped {now - iv.stamp_s:.3f} s ago, "
                                f"more than max_age_s={max_age_s}", "stale")
    cmd = np.asarray(iv.command)
    if iv.kind == "override":
        if cmd.shape != (action_dim,):
            raise InterventionError(f"override command has shape {cmd.shape}, the action has "
                                    f"{action_dim} elements", "shape")
        if not np.isfinite(cmd).all():
            raise InterventionError(f"override command is not finite: {cmd.tolist()}",
                                    "nonfinite")
    elif cmd.size:
        raise InterventionError(f"{iv.kind} carries no command, got {cmd.size} values",
                                "shape")


class InterventionSlot:
    """The operator's current state as the loop sees it (thread-safe, no allocation on read).

    :meth:`push` validates and applies a record (``override`` sets the command, ``release``
    clears it, ``estop`` raises a flag the loop turns into its e-stop latch);
    :meth:`read_into` gives the loop the active override, and whether this tick starts one.

    Args:
        action_dim: A.
        max_age_s / max_future_s: Validation bounds (see :func:`validate_intervention`).
    """

    def __init__(self, action_dim: int, max_age_s: float = 0.5,
                 max_future_s: float = 0.01) -> None:
        self.action_dim = int(action_dim)
        self.max_age_s = max_age_s
        self.max_future_s = max_future_s
        self._cmd = np.zeros(self.action_dim, np.float32)
        self._active = False
        self._started = False  # an override began since the loop last read
        self._estop = False
        self._lock = threading.Lock()
        #: Records applied, by kind.
        self.counts = dict.fromkeys(KINDS, 0)

    def push(self, iv: Intervention, now: float) -> None:
        """Validate ``iv`` at monotonic time ``now`` and apply it (raises
        :class:`InterventionError`; nothing changes then)."""
        validate_intervention(iv, self.action_dim, now, self.max_age_s, self.max_future_s)
        with self._lock:
            self.counts[iv.kind] += 1
            if iv.kind == "override":
                np.copyto(self._cmd, np.asarray(iv.command, np.float32))
                self._started |= not self._active
                self._active = True
            elif iv.kind == "release":
                self._active = False
            else:
                self._estop = True

    @property
    def active(self) -> bool:
        """Whether an override is in force."""
        return self._active

    def take_estop(self) -> bool:
        """True once per ``estop`` record (the loop latches its e-stop)."""
        with self._lock:
            hit, self._estop = self._estop, False
            return hit

    def poll_into(self, out: np.ndarray) -> tuple[bool, bool, bool]:
        """:meth:`take_estop` and :meth:`read_into` under one lock (the loop's one call per
        tick): ``(estop, active, started)``."""
        with self._lock:
            estop, self._estop = self._estop, False
            started, self._started = self._started and self._active, False
            if self._active:
                np.copyto(out, self._cmd)
            return estop, self._active, started

    def read_into(self, out: np.ndarray) -> tuple[bool, bool]:
        """Copy the override command into ``out`` ``(A,)``; returns ``(active, started)``
        (``started``: an override began since the previous read)."""
        with self._lock:
            started, self._started = self._started and self._active, False
            if self._active:
                np.copyto(out, self._cmd)
            return self._active, started

    def clear(self) -> None:
        """Drop any active override (an episode boundary)."""
        with self._lock:
            self._active = self._started = False
