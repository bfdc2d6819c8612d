"""``ActionChunk``: a planner's H-step action proposal, indexed by time.

Row ``i`` of a chunk is the action meant for the interval ``[t0 + i*dt, t0 + (i+1)*dt)``
(monotonic seconds). In simulation the same chunk is indexed by control step: row ``i`` is
meant for step ``step0 + i``. Nothing infers time from arrival order: ``obs_time`` records
when the observation the planner saw was taken, so the chunk's age is ``now - obs_time``.

A chunk may carry the planner's *intent*: a compact vector (at most :data:`MAX_INTENT`
floats, a learned planner's values in ``[-1, 1]``) exported with the rows, which the edit
policy reads beside them (:class:`edgerl.contract.edit_obs.EditObsConfig.intent_dim`). It
travels wherever the chunk travels (planner process pipe, network protocol, ROS message,
serial CHUNK).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["BOUNDARY_EPS", "MAX_INTENT", "ActionChunk", "ChunkError", "check_intent"]

#: A time within this fraction of a row of a row boundary counts as the next row, so that
#: ``t0 + i*dt`` selects row ``i`` despite floating-point rounding.
BOUNDARY_EPS = 1e-6
#: Largest planner intent (floats) a chunk may carry: what one serial CHUNK message holds
#: (``edgerl.contract.wire.schema``), so an intent fits every transport.
MAX_INTENT = 8


class ChunkError(ValueError):
    """An action chunk is malformed (shape, non-finite values, non-monotonic times)."""


def check_intent(intent: object) -> np.ndarray:
    """``intent`` as a read-only C-contiguous float32 ``(I,)`` array, ``1 <= I <=``
    :data:`MAX_INTENT`, every value finite; :class:`ChunkError` naming the problem otherwise."""
    arr = np.asarray(intent)
    if arr.ndim != 1 or not 1 <= arr.shape[0] <= MAX_INTENT:
        raise ChunkError(f"intent must have shape (I,) with 1 <= I <= {MAX_INTENT}, got shape "
                         f"{arr.shape} (None: no intent)")
    arr = _finite_float32(arr, "intent")
    arr.setflags(write=False)
    return arr


def _finite_float32(arr: np.ndarray, name: str) -> np.ndarray:
    """The numeric ``arr`` as a C-contiguous float32 array; :class:`ChunkError` naming a
    non-numeric dtype or the first entry that is not finite (``name[i, j]``)."""
    if not np.issubdtype(arr.dtype, np.number):
        raise ChunkError(f"{name} must be numeric, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if not np.all(np.isfinite(arr)):
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
        raise ChunkError(f"{name}[{', '.join(map(str, bad))}] is not finite ({arr[bad]})")
    return arr


@dataclass(frozen=True)
class ActionChunk:
    """H rows of actions for consecutive control intervals.

    Attributes:
        actions: Shape ``(H, A)`` float32, row ``i`` for ``[t0 + i*dt, t0 + (i+1)*dt)``.
        t0: Start time of row 0, monotonic seconds.
        dt: Row spacing in seconds (> 0).
        step0: Control step of row 0 (simulation indexing; ``-1`` when unknown).
        obs_time: Monotonic time (s) at which the planner's observation was taken.
        source: Who produced the chunk (``"planner"``, ``"expert"``, a model name...).
        meta: Free-form notes (merge details, request ids); not compared.
        intent: Optional ``(I,)`` float32 planner intent (read-only), ``None`` when the
            planner exports none.
    """

    actions: np.ndarray
    t0: float
    dt: float
    step0: int = -1
    obs_time: float = float("nan")
    source: str = "planner"
    meta: dict = field(default_factory=dict, compare=False)
    intent: np.ndarray | None = None

    def __post_init__(self) -> None:
        actions = np.asarray(self.actions)
        if actions.ndim != 2:
            raise ChunkError(f"actions must have shape (H, A), got shape {actions.shape}")
        if actions.shape[0] < 1 or actions.shape[1] < 1:
            raise ChunkError(f"actions must have H >= 1 rows and A >= 1 columns, got "
                             f"{actions.shape}")
        actions = _finite_float32(actions, "actions")
        if not (math.isfinite(self.dt) and self.dt > 0.0):
            raise ChunkError(f"dt must be a finite positive number of seconds, got {self.dt!r}")
        if not math.isfinite(self.t0):
            raise ChunkError(f"t0 must be finite, got {self.t0!r}")
        if math.isfinite(self.obs_time) and self.obs_time > self.t0 + self.horizon_s:
            raise ChunkError(
                f"obs_time {self.obs_time:.6f} lies after the chunk's end {self.t_end:.6f}")
        actions.setflags(write=False)
        object.__setattr__(self, "actions", actions)
        if self.intent is not None:
            object.__setattr__(self, "intent", check_intent(self.intent))

    @classmethod
    def from_times(cls, times: np.ndarray, actions: np.ndarray, *, rtol: float = 1e-3,
                   **kwargs: object) -> ActionChunk:
        """Build a chunk from per-row start times (s); they must be strictly increasing and
        evenly spaced to ``rtol`` of the spacing (as a ROS JointTrajectory's points are)."""
        times = np.asarray(times, dtype=np.float64)
        if times.ndim != 1 or times.shape[0] != np.shape(actions)[0]:
            raise ChunkError(f"need one time per row: {times.shape} times for "
                             f"{np.shape(actions)[0]} rows")
        if not np.all(np.isfinite(times)):
            raise ChunkError("row times must be finite")
        if times.shape[0] == 1:
            if "dt" not in kwargs:
                raise ChunkError("a one-row chunk needs an explicit dt")
            return cls(actions=actions, t0=float(times[0]), **kwargs)  # type: ignore[arg-type]
        gaps = np.diff(times)
        if np.any(gaps <= 0):
            i = int(np.argmax(gaps <= 0))
            raise ChunkError(f"row times must increase: time[{i + 1}]={times[i + 1]:.6f} <= "
                             f"time[{i}]={times[i]:.6f}")
        dt = float(np.mean(gaps))
        if np.max(np.abs(gaps - dt)) > rtol * dt:
            raise ChunkError(f"row times must be evenly spaced; spacings range "
                             f"{gaps.min():.6f}..{gaps.max():.6f} s")
        kwargs.pop("dt", None)
        return cls(actions=actions, t0=float(times[0]), dt=dt, **kwargs)  # type: ignore[arg-type]

    # --- sizes -------------------------------------------------------------------------
    @property
    def horizon(self) -> int:
        """Number of rows H."""
        return int(self.actions.shape[0])

    @property
    def action_dim(self) -> int:
        """Action size A."""
        return int(self.actions.shape[1])

    @property
    def intent_dim(self) -> int:
        """Size I of the planner intent (0 without one)."""
        return 0 if self.intent is None else int(self.intent.shape[0])

    @property
    def horizon_s(self) -> float:
        """Duration covered by the chunk, ``H * dt`` seconds."""
        return self.horizon * self.dt

    @property
    def t_end(self) -> float:
        """End of the last row's interval (s); from here on the chunk is stale."""
        return self.t0 + self.horizon_s

    def times(self) -> np.ndarray:
        """Start time of every row, shape ``(H,)`` float64 seconds."""
        return self.t0 + self.dt * np.arange(self.horizon, dtype=np.float64)

    # --- time indexing -----------------------------------------------------------------
    def index_at(self, t: float) -> int | None:
        """Row index for time ``t``; ``None`` once the chunk is stale (``t >= t_end``).

        A time before ``t0`` selects row 0: the chunk has not started, its first row holds.
        """
        if t >= self.t_end - BOUNDARY_EPS * self.dt:
            return None
        i = math.floor((t - self.t0) / self.dt + BOUNDARY_EPS)
        return min(max(i, 0), self.horizon - 1)

    def row_at(self, t: float) -> np.ndarray | None:
        """The action for time ``t`` (shape ``(A,)``, read-only view) or ``None`` if stale."""
        i = self.index_at(t)
        return None if i is None else self.actions[i]

    def rows_from(self, t: float) -> np.ndarray:
        """Rows not yet past at time ``t``: shape ``(H - i, A)``; ``(0, A)`` when stale."""
        i = self.index_at(t)
        return self.actions[self.horizon:] if i is None else self.actions[i:]

    def is_stale(self, t: float) -> bool:
        """True when every row's interval has ended by time ``t`` (the chunk's own coverage;
        when the loop stops using it is ``edgerl.contract.timing.TimingSpec.row_at``)."""
        return self.index_at(t) is None

    def age(self, t: float) -> float:
        """Seconds since the planner's observation (``t - obs_time``); ``t - t0`` if unknown."""
        ref = self.obs_time if math.isfinite(self.obs_time) else self.t0
        return t - ref

    # --- step indexing (simulation) ----------------------------------------------------
    def index_at_step(self, step: int) -> int | None:
        """Row index for control step ``step`` (``step - step0``); ``None`` past the end."""
        if self.step0 < 0:
            raise ChunkError("this chunk has no step0; index it by time")
        i = step - self.step0
        if i >= self.horizon:
            return None
        return max(i, 0)
