"""The planning-budget gate's observation, defined once for training (torch batches, the
sim's ``GatedEnv``) and deployment (numpy single samples, a runtime gate).

The gate sees, at a decision point::

    [ fast obs (F) | chunk_age | rows_left | has_chunk | in_flight | plan_preview (P*A) ]

Every element is runtime state: the robot's fast observation (no planner-only element), the
current chunk (its rows, when its planner observation was taken, how many rows its budget
planned) and whether a query is in flight. :data:`GATE_EXTRA_OBS` names the elements after
the fast observation:

* ``chunk_age``: steps since the current chunk's planner observation / ``age_scale`` (0
  without a usable chunk);
* ``rows_left``: planned rows of the current chunk after now / ``age_scale`` (0 without one);
* ``has_chunk``: 1 while a chunk is running and not past its planned rows + stale steps;
* ``in_flight``: 1 while a query is in flight;
* ``plan_preview``: the rows the current chunk commands ``preview_steps`` steps from now
  (``P`` offsets, all ``A`` action elements, offset-major), 0 where the chunk will not be
  usable then (past its planned rows + stale steps) or there is none. The plan encodes the
  road ahead as the planner saw it: a swerve coming shows as large steering rows.

The same function runs on ``numpy.ndarray`` and ``torch.Tensor`` (torch is imported only when
a tensor is passed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from edgerl.edit_obs import select_chunk_rows
from edgerl.timing_rules import chunk_usable

__all__ = ["GATE_EXTRA_OBS", "GATE_OBS_MEANING", "GateObsConfig", "build_gate_obs"]

Array = Any  # numpy.ndarray or torch.Tensor

#: Observation elements the gate adds after the fast observation, in order.
GATE_EXTRA_OBS = ("chunk_age", "rows_left", "has_chunk", "in_flight", "plan_preview")
#: One line per element of :data:`GATE_EXTRA_OBS` (units and size).
GATE_OBS_MEANING = {
    "chunk_age": "steps since the current chunk's planner observation / age_scale (1)",
    "rows_left": "planned rows of the current chunk after now / age_scale (1)",
    "has_chunk": "1 while a usable chunk runs, else 0 (1)",
    "in_flight": "1 while a planner query is in flight, else 0 (1)",
    "plan_preview": "current chunk's rows preview_steps steps ahead, 0 where unusable (P*A)",
}


@dataclass
class GateObsConfig:
    """Sizes and scales of the gate observation.

    Attributes:
        fast_dim: F, elements of the fast observation given to :func:`build_gate_obs`.
        action_dim: A.
        age_scale: Chunk age and rows left are divided by this (steps).
        stale_steps: Steps past a chunk's planned rows it still runs (the gate env's).
        preview_steps: Offsets (steps from now, >= 0) of the previewed chunk rows (P).
    """

    fast_dim: int
    action_dim: int
    age_scale: float = 20.0
    stale_steps: int = 0
    preview_steps: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        self.preview_steps = tuple(int(o) for o in self.preview_steps)
        if self.fast_dim < 0 or self.action_dim < 1:
            raise ValueError(f"gate obs: fast_dim must be >= 0 and action_dim >= 1, got "
                             f"{self.fast_dim}, {self.action_dim}")
        if self.age_scale <= 0 or self.stale_steps < 0:
            raise ValueError("gate obs: age_scale must be > 0 and stale_steps >= 0")
        if any(o < 0 for o in self.preview_steps):
            raise ValueError(f"gate obs: preview_steps must be >= 0, got {self.preview_steps}")

    @property
    def dim(self) -> int:
        """Total size F + 4 + P*A."""
        return self.fast_dim + 4 + len(self.preview_steps) * self.action_dim


def build_gate_obs(fast_obs: Array, chunk: Array, row_index: Array, planned_rows: Array,
                   age_steps: Array, has_chunk: Array, in_flight: Array,
                   cfg: GateObsConfig) -> Array:
    """Assemble the gate observation.

    Args:
        fast_obs: ``(..., F)`` the robot's fast observation elements.
        chunk: ``(..., H, A)`` the current chunk (any values where there is none).
        row_index: ``(...,)`` integer: the chunk row for now (steps since its step0).
        planned_rows: ``(...,)`` integer: rows its budget planned (the rest hold the last).
        age_steps: ``(...,)`` steps since its planner observation.
        has_chunk: ``(...,)`` bool/0-1: a usable chunk runs now.
        in_flight: ``(...,)`` bool/0-1: a query is in flight.
        cfg: Sizes and scales.

    Returns:
        ``(..., cfg.dim)`` float32.
    """
    if fast_obs.shape[-1] != cfg.fast_dim or chunk.shape[-1] != cfg.action_dim:
        raise ValueError(f"gate obs: got fast obs of {fast_obs.shape[-1]} and actions of "
                         f"{chunk.shape[-1]} elements, the config expects {cfg.fast_dim} and "
                         f"{cfg.action_dim}")
    torch_mode = type(fast_obs).__module__.startswith("torch")
    if torch_mode:
        import torch as xp

        def f32(x: Array) -> Array:
            return xp.as_tensor(x, device=fast_obs.device).to(xp.float32)

        cat = xp.cat
    else:
        xp = np

        def f32(x: Array) -> Array:
            return np.asarray(x).astype(np.float32)

        cat = np.concatenate
    has = f32(has_chunk)
    scale = float(cfg.age_scale)
    age = f32(age_steps) * has / scale
    left = xp.clip(f32(planned_rows) - f32(row_index), 0.0, None) * has / scale
    parts = [f32(fast_obs), age[..., None], left[..., None], has[..., None],
             f32(in_flight)[..., None]]
    batch = tuple(fast_obs.shape[:-1])
    for o in cfg.preview_steps:
        ahead = row_index + o
        row = f32(select_chunk_rows(chunk, ahead, 1)[..., 0, :])
        usable = f32(chunk_usable(ahead, planned_rows, cfg.stale_steps)) * has
        parts.append(row * usable[..., None])
    out = cat(parts, -1)
    if tuple(out.shape) != (*batch, cfg.dim):
        raise ValueError(f"gate obs: built shape {tuple(out.shape)}, expected "
                         f"{(*batch, cfg.dim)}")
    return out

