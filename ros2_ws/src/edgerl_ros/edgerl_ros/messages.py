"""Conversions between ROS 2 messages and edgerl's contract types, with strict checks.

Every check failure raises :class:`BadMessage` whose text starts with a short reason kind
(``wrong_length``, ``non_finite``, ``unknown_joint``, ``missing_joint``, ``decreasing_times``,
``bad_chunk``); the nodes count and drop such messages and keep running.

Chunks travel as ``trajectory_msgs/JointTrajectory``; a chunk's planner intent (I values)
travels as extra named columns ``intent/0 .. intent/I-1`` after the action names, the same
values in every point, so the message stays standard and says what it carries.

Time: message stamps are ROS time (the system clock, shared by every process on a host and
synchronised across hosts); the fast loop runs on the monotonic clock. :class:`TimeBase`
converts between the two with one offset measured at start-up.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np
from builtin_interfaces.msg import Duration, Time
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from edgerl.contract.chunk import ActionChunk, ChunkError

__all__ = [
    "COMMAND_FIELDS",
    "INTENT_PREFIX",
    "BadMessage",
    "StampMemo",
    "TimeBase",
    "chunk_to_trajectory",
    "duration_to_s",
    "joint_state_values",
    "make_joint_state",
    "ns_to_stamp",
    "stamp_to_ns",
    "trajectory_to_chunk",
]

#: JointState fields a command may be written to (``command_field`` parameter).
COMMAND_FIELDS = ("position", "velocity", "effort")
#: Joint-name prefix of a chunk's planner-intent columns (``intent/0``, ``intent/1``...).
INTENT_PREFIX = "intent/"


class BadMessage(ValueError):
    """A received message is malformed; ``str(exc)`` starts with the reason kind."""


def stamp_to_ns(stamp: Time) -> int:
    """``builtin_interfaces/Time`` -> integer nanoseconds."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def ns_to_stamp(ns: int) -> Time:
    """Integer nanoseconds -> ``builtin_interfaces/Time``."""
    return Time(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


def duration_to_s(d: Duration) -> float:
    return float(d.sec) + float(d.nanosec) * 1e-9


def _s_to_duration(s: float) -> Duration:
    ns = int(round(s * 1e9))
    return Duration(sec=int(ns // 1_000_000_000), nanosec=int(ns % 1_000_000_000))


class StampMemo:
    """Remembers the exact ROS stamp (ns) behind the last few monotonic times derived from
    stamps, so a reply can carry the original stamp bit-for-bit (a float64 round trip of
    ~1.8e18 ns is only good to ~0.4 us). Lock-free: one writer, lookups by value."""

    def __init__(self, keep: int = 64) -> None:
        self._stamps: dict[float, int] = {}
        self._keep = keep

    def remember(self, t: float, stamp_ns: int) -> None:
        self._stamps[t] = stamp_ns
        if len(self._stamps) > self._keep:
            self._stamps.pop(next(iter(self._stamps)))

    def get(self, t: float) -> int | None:
        """The stamp behind monotonic time ``t``, or ``None``."""
        return self._stamps.get(t)


class TimeBase:
    """Converts ROS (system-clock) nanoseconds to monotonic seconds and back.

    The offset ``wall - monotonic`` is measured once (best of a few tight samples), so a
    later NTP step does not make chunk times jump inside one process.
    """

    def __init__(self) -> None:
        best = None
        for _ in range(5):
            m0 = time.perf_counter()
            w = time.time_ns()
            m1 = time.perf_counter()
            if best is None or (m1 - m0) < best[0]:
                best = (m1 - m0, w * 1e-9 - 0.5 * (m0 + m1))
        self.wall_minus_mono = best[1]  # type: ignore[index]

    def to_mono(self, wall_ns: int) -> float:
        """ROS time (ns) -> monotonic seconds (``time.perf_counter`` base)."""
        return wall_ns * 1e-9 - self.wall_minus_mono

    def to_wall_ns(self, mono_s: float) -> int:
        """Monotonic seconds -> ROS time (ns)."""
        return int(round((mono_s + self.wall_minus_mono) * 1e9))


#: Largest magnitude a value may have: the runtime holds float32, where more is ``inf``.
F32_MAX = float(np.finfo(np.float32).max)


def _finite(name: str, values: np.ndarray) -> None:
    """Refuse NaN/inf and values that overflow to inf in float32 (1e39, 1e308)."""
    if not np.all(np.isfinite(values)):
        i = int(np.argmax(~np.isfinite(values)))
        raise BadMessage(f"non_finite: {name}[{i}] = {values[i]}")
    big = np.abs(values) > F32_MAX
    if np.any(big):
        i = int(np.argmax(big))
        raise BadMessage(f"overflow: {name}[{i}] = {values[i]:g} is not representable "
                         "in float32")


def joint_state_values(msg: JointState, names: Sequence[str], field: str = "position"
                       ) -> np.ndarray:
    """The values of ``names`` (in that order) from ``msg.<field>``, shape ``(len(names),)``.

    The message's ``name`` list must contain exactly the expected names (any order) and the
    field must have one finite value per name.
    """
    values = np.asarray(getattr(msg, field), dtype=np.float64)
    msg_names = list(msg.name)
    if values.shape[0] != len(msg_names):
        raise BadMessage(f"wrong_length: {len(msg_names)} names but {values.shape[0]} "
                         f"{field} values")
    unknown = [n for n in msg_names if n not in names]
    if unknown:
        raise BadMessage(f"unknown_joint: {unknown[:3]} not in the manifest's names")
    if len(msg_names) != len(names) or len(set(msg_names)) != len(msg_names):
        missing = [n for n in names if n not in msg_names]
        raise BadMessage(f"wrong_length: expected {len(names)} unique names, got "
                         f"{len(msg_names)} (missing {missing[:3]})")
    _finite(field, values)
    if msg_names == list(names):
        return values.astype(np.float32)
    index = {n: i for i, n in enumerate(msg_names)}
    return values[[index[n] for n in names]].astype(np.float32)


def stamped_state(msg: JointState, names: Sequence[str]) -> tuple[np.ndarray, int]:
    """A robot state's observation (``names`` order, float32) and header stamp (ns).

    Raises :class:`BadMessage` for what :func:`joint_state_values` rejects and for a zero
    stamp (nothing infers time from arrival order).
    """
    obs = joint_state_values(msg, names)
    stamp = stamp_to_ns(msg.header.stamp)
    if stamp <= 0:
        raise BadMessage("no_stamp: header.stamp is zero")
    return obs, stamp


def make_joint_state(names: Sequence[str], values: np.ndarray, stamp_ns: int,
                     field: str = "position", frame_id: str = "") -> JointState:
    """A JointState with ``values`` in ``field`` (the other fields empty)."""
    msg = JointState()
    msg.header.stamp = ns_to_stamp(stamp_ns)
    msg.header.frame_id = frame_id
    msg.name = list(names)
    setattr(msg, field, [float(v) for v in values])
    return msg


def _split_intent(names: list[str]) -> tuple[list[int], list[int]]:
    """``(action columns, intent columns in intent order)`` of a trajectory's joint names; the
    intent columns must be ``intent/0 .. intent/I-1``, each once."""
    cols = [i for i, n in enumerate(names) if n.startswith(INTENT_PREFIX)]
    action_cols = [i for i, n in enumerate(names) if not n.startswith(INTENT_PREFIX)]
    if not cols:
        return action_cols, []
    index = {names[i][len(INTENT_PREFIX):]: i for i in cols}
    want = [str(k) for k in range(len(cols))]
    if len(index) != len(cols) or sorted(index) != sorted(want):
        raise BadMessage(f"bad_chunk: intent columns {[names[i] for i in cols][:4]} are not "
                         f"{INTENT_PREFIX}0..{len(cols) - 1}")
    return action_cols, [index[k] for k in want]


def trajectory_to_chunk(msg: JointTrajectory, action_names: Sequence[str], timebase: TimeBase,
                        source: str = "planner") -> ActionChunk:
    """A JointTrajectory chunk -> :class:`ActionChunk` on the monotonic clock.

    ``header.stamp`` is the planner's observation time; point ``i`` is meant for
    ``stamp + time_from_start[i]``; ``positions`` hold the action row (names as in the
    manifest, any order) and, in the columns named ``intent/k``, the planner intent (the same
    in every point).
    """
    all_names = list(msg.joint_names)
    action_cols, intent_cols = _split_intent(all_names)
    names = [all_names[i] for i in action_cols]
    unknown = [n for n in names if n not in action_names]
    if unknown:
        raise BadMessage(f"unknown_joint: {unknown[:3]} not in the manifest's action names")
    if len(names) != len(action_names) or len(set(names)) != len(names):
        raise BadMessage(f"wrong_length: expected {len(action_names)} joint names, got "
                         f"{len(names)}")
    if not msg.points:
        raise BadMessage("bad_chunk: no points")
    values = np.empty((len(msg.points), len(all_names)), dtype=np.float64)
    offsets = np.empty(len(msg.points), dtype=np.float64)
    for i, point in enumerate(msg.points):
        if len(point.positions) != len(all_names):
            raise BadMessage(f"wrong_length: point {i} has {len(point.positions)} positions "
                             f"for {len(all_names)} joints")
        values[i] = point.positions
        offsets[i] = duration_to_s(point.time_from_start)
    _finite("points.positions", values.ravel())
    if offsets.size > 1 and np.any(np.diff(offsets) <= 0):
        i = int(np.argmax(np.diff(offsets) <= 0))
        raise BadMessage(f"decreasing_times: time_from_start[{i + 1}]={offsets[i + 1]:.6f} <= "
                         f"time_from_start[{i}]={offsets[i]:.6f}")
    rows = values[:, action_cols]
    if names != list(action_names):
        index = {n: i for i, n in enumerate(names)}
        rows = rows[:, [index[n] for n in action_names]]
    intent = None
    if intent_cols:
        per_point = values[:, intent_cols]
        if np.any(per_point != per_point[0]):
            raise BadMessage("bad_chunk: the intent columns differ between points")
        intent = per_point[0]
    obs_time = timebase.to_mono(stamp_to_ns(msg.header.stamp))
    try:
        return ActionChunk.from_times(obs_time + offsets, rows, obs_time=obs_time,
                                      source=source, intent=intent)
    except ChunkError as exc:
        raise BadMessage(f"bad_chunk: {exc}") from exc


def chunk_to_trajectory(chunk: ActionChunk, action_names: Sequence[str], timebase: TimeBase,
                        stamp_ns: int | None = None) -> JointTrajectory:
    """:class:`ActionChunk` -> JointTrajectory (stamp = observation time; ``stamp_ns`` gives
    the exact original stamp when known, else it is converted from ``obs_time``); a planner
    intent goes into the columns ``intent/0 .. intent/I-1`` of every point."""
    if chunk.action_dim != len(action_names):
        raise ValueError(f"chunk has {chunk.action_dim} columns for {len(action_names)} names")
    ref = chunk.obs_time if math.isfinite(chunk.obs_time) else chunk.t0
    msg = JointTrajectory()
    msg.header.stamp = ns_to_stamp(timebase.to_wall_ns(ref) if stamp_ns is None else stamp_ns)
    intent = [] if chunk.intent is None else [float(v) for v in chunk.intent]
    msg.joint_names = list(action_names) + [f"{INTENT_PREFIX}{k}" for k in range(len(intent))]
    for i, t in enumerate(chunk.times()):
        point = JointTrajectoryPoint()
        point.positions = [float(v) for v in chunk.actions[i]] + intent
        point.time_from_start = _s_to_duration(float(t) - ref)
        msg.points.append(point)
    return msg
