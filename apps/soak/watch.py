"""The soak's checks on the live graph: every command the edit node publishes (finite, inside
the manifest's limits, the safe action while e-stopped) and the nodes' ``/diagnostics``
counters summed across restarts."""

from __future__ import annotations

import math
import threading
from collections import defaultdict
from typing import Any

import numpy as np

__all__ = ["CommandWatch", "DiagTotals", "as_number"]

#: Tolerance (command units) on the manifest limits and the safe action.
LIMIT_TOL = 1e-5


def as_number(text: Any) -> float:
    """A diagnostics value as float (NaN when missing or not a number)."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("nan")


#: How long after a re-arm an e-stop report that predates the node applying it is ignored.
REARM_GRACE_NS = 2_000_000_000

class CommandWatch:
    """Checks each command on ``robot/command`` that the edit node published.

    A command is **unsafe** if it is not finite, lies outside ``[low, high]``, has the wrong
    size, or was published (``MessageInfo["source_timestamp"]``, the edit node's clock) after
    a diagnostics report that said the loop is e-stopped was published, and differs from the
    safe action (the latch holds until reset; commands sent before that report may predate
    the latch and are not judged). Other publishers' commands (the soak's own bad ones)
    are counted as ``foreign`` and not checked here: the robot must refuse them.

    Args:
        names: Action names in manifest order.
        low, high: Manifest limits, shape ``(A,)``.
        safe_action: The e-stop command, shape ``(A,)``.
        field: JointState field carrying the command.
        accept: ``MessageInfo -> bool``: whether the edit node sent it (publisher GID).
    """

    def __init__(self, names: list[str], low: np.ndarray, high: np.ndarray,
                 safe_action: np.ndarray, field: str, accept: Any) -> None:
        self.names = list(names)
        self.low, self.high = np.asarray(low, np.float64), np.asarray(high, np.float64)
        self.safe_action = np.asarray(safe_action, np.float64)
        self.field, self.accept = field, accept
        self.lock = threading.Lock()
        self.commands = 0
        self.foreign = 0
        self.unsafe: dict[str, int] = defaultdict(int)
        self.unsafe_examples: list[str] = []
        self.estopped_since_ns: int | None = None  # publish time of the e-stop report
        self.rearmed_ns = 0  # the operator's newest re-arm (wall ns)
        self.rearms = 0  # re-arms the operator published
        self.commands_while_estopped = 0

    def set_estopped(self, estopped: bool, report_ns: int, resets: int | None = None) -> None:
        """A diagnostics report published at ``report_ns`` (wall ns) says the loop is / is
        not e-stopped; ``resets`` is the node's count of applied operator re-arms."""
        with self.lock:
            if report_ns < self.rearmed_ns:  # a report from before the operator's re-arm
                return
            # published after the re-arm but before the node applied it (its reset counter
            # is behind): still the old latch. Bounded: a lost re-arm counts again after
            # REARM_GRACE_NS, so commands are never judged by the limits alone for longer.
            if (resets is not None and resets < self.rearms
                    and report_ns < self.rearmed_ns + REARM_GRACE_NS):
                return
            if not estopped:
                self.estopped_since_ns = None
            elif self.estopped_since_ns is None:
                self.estopped_since_ns = int(report_ns)

    def rearmed(self, at_ns: int) -> None:
        """The operator re-armed the e-stop at wall time ``at_ns``: commands from then on are
        judged by the limits alone until a newer report says e-stop again."""
        with self.lock:
            self.rearmed_ns = int(at_ns)
            self.rearms += 1
            self.estopped_since_ns = None

    def _flag(self, reason: str, values: Any) -> None:
        self.unsafe[reason] += 1
        if len(self.unsafe_examples) < 5:
            self.unsafe_examples.append(f"{reason}: {list(values)[:4]}")

    def on_command(self, msg: Any, info: Any) -> None:
        """Subscription callback ``(JointState, MessageInfo)``."""
        if not self.accept(info):
            with self.lock:
                self.foreign += 1
            return
        vals = np.asarray(getattr(msg, self.field), np.float64)
        with self.lock:
            self.commands += 1
            if list(msg.name) != self.names or vals.shape != self.low.shape:
                self._flag("wrong_size", vals)
            elif not np.all(np.isfinite(vals)):
                self._flag("nonfinite", vals)
            elif np.any(vals < self.low - LIMIT_TOL) or np.any(vals > self.high + LIMIT_TOL):
                self._flag("outside_limits", vals)
            elif self.estopped_since_ns is not None and \
                    _sent_ns(info) > self.estopped_since_ns:
                self.commands_while_estopped += 1
                if not np.allclose(vals, self.safe_action, atol=LIMIT_TOL):
                    self._flag("not_safe_while_estopped", vals)

    @property
    def unsafe_total(self) -> int:
        with self.lock:
            return int(sum(self.unsafe.values()))


def _sent_ns(info: Any) -> int:
    """Publish time (wall ns) from a ``MessageInfo``; 0 when unknown."""
    try:
        return int(info.get("source_timestamp") or 0)
    except (AttributeError, TypeError, ValueError):
        return 0


class DiagTotals:
    """Per-node diagnostics: the newest values, and counters summed across restarts (a
    counter that goes down means a new process: its old value is banked)."""

    COUNTERS = ("dropped_bad_msgs", "deadline_misses", "escalations", "estops",
                "commands_refused", "dropped_commands", "operator_accepted")
    PREFIXES = ("dropped ", "ticks ", "safety ", "refused ", "escalation ",
                "operator_refused ")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latest: dict[str, dict[str, str]] = {}
        self._last: dict[tuple[str, str], float] = {}
        self._banked: dict[tuple[str, str], float] = defaultdict(float)
        self.messages = 0
        self.states_seen: dict[str, set[str]] = defaultdict(set)

    def update(self, name: str, values: dict[str, str]) -> None:
        with self.lock:
            self.messages += 1
            self.latest[name] = dict(values)
            if "state" in values:
                self.states_seen[name].add(values["state"])
            for key, text in values.items():
                if not (key in self.COUNTERS or key.startswith(self.PREFIXES)):
                    continue
                v = as_number(text)
                if not math.isfinite(v):
                    continue
                last = self._last.get((name, key), 0.0)
                if v < last:
                    self._banked[(name, key)] += last
                self._last[(name, key)] = v

    def total(self, key: str, name: str | None = None) -> int:
        """``key`` summed over processes (and nodes, when ``name`` is None)."""
        with self.lock:
            keys = {k for k in self._last if k[1] == key and (name is None or k[0] == name)}
            return int(sum(self._last[k] + self._banked[k] for k in keys))

    def by_prefix(self, prefix: str) -> dict[str, int]:
        """``{"<node> <key>": total}`` for counters whose key starts with ``prefix``."""
        with self.lock:
            keys = [k for k in self._last if k[1].startswith(prefix)]
            return {f"{n.removeprefix('edgerl: ')} {k}": int(self._last[(n, k)]
                                                              + self._banked[(n, k)])
                    for n, k in sorted(keys)}
