"""The edit policy's observation, defined once for training (torch batches) and deployment
(numpy single samples).

The fast edit policy sees the newest robot observation together with the planner's chunk::

    [ fast obs (F) | chunk row for now (A) | next L rows (L*A) | chunk age (1) |
      K committed actions, newest first (K*A) | has_chunk (1) | planner intent (I) ]

* **Information split.** The builder takes the whole robot observation ``(..., O)`` and keeps
  only the elements ``EditObsConfig.obs_indices`` names: the *fast* subset a robot reads at the
  control rate (proprioception). Elements only the planner sees (the instruction's goal, a
  camera's target, privileged state) never reach the edit policy; they reach it only through
  the chunk. An empty ``obs_indices`` keeps every element: the *full-observation* setting, in
  which the edit policy is a bounded no-delay policy that needs no planner.

* Rows past the chunk's end repeat its last row (hold), so lookahead never reads garbage.
* Chunk age is ``clip(age_s / age_scale_s, 0, age_clip)``: seconds since the planner's
  observation was taken, scaled to order 1.
* ``has_chunk`` is 1 when a (non-stale) chunk exists; when it is 0, the chunk segments (and
  the intent) are +0.0, whatever the stale chunk held: the bytes of the observation do not
  depend on rows no longer in use (the training wrapper keeps them, the runtime clears them).
* **Planner intent** (``intent_dim`` I > 0): a compact vector the planner exports beside its
  chunk (a bottleneck of its hidden state: what it inferred from the goal, the camera, the
  instruction). It changes slowly, so a chunk's intent stays informative long after its rows
  went stale in the robot's new state; the edit policy reads it with the chunk (zeros without
  a chunk). I = 0 (the default) leaves the layout as it was.

The same functions run on ``numpy.ndarray`` and ``torch.Tensor`` (the torch namespace is
used only when a tensor is passed; this module never imports torch itself). Every operation
is elementwise float32 or a copy, so numpy and torch give bitwise-identical results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgerl.contract.chunk import MAX_INTENT

__all__ = ["EditObsConfig", "EditObsWriter", "build_edit_obs", "compose_edit_action",
           "select_chunk_rows", "select_fast_obs"]

Array = Any  # numpy.ndarray or torch.Tensor

_ONE, _MINUS_ONE = np.float32(1.0), np.float32(-1.0)


@dataclass
class EditObsConfig:
    """Sizes and scales of the edit observation (stored in the manifest as ``edit_obs``).

    Attributes:
        obs_dim: Size O of the robot observation given to :func:`build_edit_obs`.
        action_dim: Size A of an action.
        lookahead: Chunk rows after the current one (L).
        n_committed: Last commands sent (K).
        age_scale_s / age_clip: Chunk age scaling (seconds) and clip.
        obs_indices: Indices (into the robot observation, ascending) the edit policy reads:
            the task's fast subset. Empty = every element (the full-observation setting).
        intent_dim: Size I of the planner's intent vector the edit policy reads (0 = none;
            at most :data:`edgerl.contract.chunk.MAX_INTENT`).
    """

    obs_dim: int
    action_dim: int
    lookahead: int = 2
    n_committed: int = 2
    age_scale_s: float = 1.0
    age_clip: float = 4.0
    obs_indices: list[int] = field(default_factory=list)
    intent_dim: int = 0

    def __post_init__(self) -> None:
        from edgerl.contract.serde import SchemaError

        for key in ("obs_dim", "action_dim"):
            if getattr(self, key) < 1:
                raise SchemaError(f"edit_obs.{key}: must be >= 1, got {getattr(self, key)}")
        for key in ("lookahead", "n_committed", "intent_dim"):
            if getattr(self, key) < 0:
                raise SchemaError(f"edit_obs.{key}: must be >= 0, got {getattr(self, key)}")
        if self.intent_dim > MAX_INTENT:
            raise SchemaError(f"edit_obs.intent_dim: at most {MAX_INTENT} (what a chunk "
                              f"carries), got {self.intent_dim}")
        if not (self.age_scale_s > 0 and self.age_clip > 0):
            raise SchemaError("edit_obs.age_scale_s and edit_obs.age_clip: must be > 0")
        self.obs_indices = [int(i) for i in self.obs_indices]
        idx = self.obs_indices
        if idx and (sorted(set(idx)) != idx or idx[0] < 0 or idx[-1] >= self.obs_dim):
            raise SchemaError(f"edit_obs.obs_indices: must be ascending, unique and within "
                              f"[0, {self.obs_dim - 1}], got {idx}")

    @property
    def fast_dim(self) -> int:
        """Size F of the observation segment the edit policy reads."""
        return len(self.obs_indices) if self.obs_indices else self.obs_dim

    @property
    def full_observation(self) -> bool:
        """Whether the edit policy reads every observation element (no information split)."""
        return len(self.obs_indices) in (0, self.obs_dim)

    @property
    def n_rows(self) -> int:
        """Chunk rows in the observation: the current one plus ``lookahead``."""
        return 1 + self.lookahead

    @property
    def dim(self) -> int:
        """Total size D of the edit observation."""
        return (self.fast_dim + (self.n_rows + self.n_committed) * self.action_dim + 2
                + self.intent_dim)

    def layout(self) -> list[tuple[str, int, int]]:
        """``(name, start, stop)`` of each segment, in order."""
        sizes = [("obs", self.fast_dim), ("chunk_now", self.action_dim),
                 ("chunk_next", self.lookahead * self.action_dim), ("chunk_age", 1),
                 ("committed", self.n_committed * self.action_dim), ("has_chunk", 1)]
        if self.intent_dim:
            sizes.append(("intent", self.intent_dim))
        out, start = [], 0
        for name, size in sizes:
            out.append((name, start, start + size))
            start += size
        return out


def _is_torch(x: Array) -> bool:
    return type(x).__module__.startswith("torch")


def select_chunk_rows(chunk_actions: Array, row_index: Array, n_rows: int) -> Array:
    """Rows ``row_index .. row_index + n_rows - 1`` of each chunk, holding the last row.

    Args:
        chunk_actions: ``(..., H, A)`` chunks.
        row_index: ``(...,)`` integer index of the row for "now" (clamped to ``[0, H-1]``).
        n_rows: How many rows to take.

    Returns:
        ``(..., n_rows, A)`` array of the same kind as ``chunk_actions``.
    """
    horizon = chunk_actions.shape[-2]
    if _is_torch(chunk_actions):
        import torch

        offsets = torch.arange(n_rows, device=chunk_actions.device)
        idx = (row_index[..., None].long() + offsets).clamp(0, horizon - 1)
        idx = idx[..., None].expand(*idx.shape, chunk_actions.shape[-1])
        return torch.gather(chunk_actions, -2, idx)
    idx = np.clip(np.asarray(row_index)[..., None].astype(np.int64) + np.arange(n_rows),
                  0, horizon - 1)
    return np.take_along_axis(np.asarray(chunk_actions), idx[..., None], axis=-2)


def select_fast_obs(obs: Array, cfg: EditObsConfig) -> Array:
    """The fast subset ``(..., F)`` of a robot observation ``(..., O)`` (a copy when split)."""
    if cfg.full_observation:
        return obs
    if _is_torch(obs):
        import torch

        idx = torch.as_tensor(cfg.obs_indices, dtype=torch.long, device=obs.device)
        return obs.index_select(-1, idx)
    return np.take(np.asarray(obs), cfg.obs_indices, axis=-1)


def build_edit_obs(obs: Array, chunk_rows: Array, chunk_age_s: Array, committed: Array,
                   has_chunk: Array, cfg: EditObsConfig, out: Array | None = None,
                   intent: Array | None = None) -> Array:
    """Assemble the edit observation.

    Args:
        obs: ``(..., O)`` newest robot observation (the whole of it: the builder keeps only
            ``cfg.obs_indices``).
        chunk_rows: ``(..., 1 + L, A)`` chunk rows from "now" on (see :func:`select_chunk_rows`).
        chunk_age_s: ``(...,)`` seconds since the chunk's planner observation.
        committed: ``(..., K, A)`` last K commands sent, newest first.
        has_chunk: ``(...,)`` 1/0 (or bool): whether a usable chunk exists.
        cfg: Sizes and scales.
        out: Optional preallocated ``(..., D)`` float32 buffer (the runtime's, to avoid
            allocating every tick). Returned filled.
        intent: ``(..., I)`` the current chunk's planner intent (``cfg.intent_dim`` > 0);
            ``None`` = zeros (a planner without one).

    Returns:
        ``(..., D)`` float32 edit observation.
    """
    batch = tuple(obs.shape[:-1])
    a_dim, n_rows, k = cfg.action_dim, cfg.n_rows, cfg.n_committed
    if obs.shape[-1] != cfg.obs_dim:
        raise ValueError(f"obs has {obs.shape[-1]} elements, the edit config expects {cfg.obs_dim}")
    if tuple(chunk_rows.shape[-2:]) != (n_rows, a_dim):
        raise ValueError(f"chunk_rows has shape {tuple(chunk_rows.shape)}, expected "
                         f"(..., {n_rows}, {a_dim})")
    if tuple(committed.shape[-2:]) != (k, a_dim):
        raise ValueError(f"committed has shape {tuple(committed.shape)}, expected "
                         f"(..., {k}, {a_dim})")
    if intent is not None and cfg.intent_dim and intent.shape[-1] != cfg.intent_dim:
        raise ValueError(f"intent has {intent.shape[-1]} elements, the edit config expects "
                         f"{cfg.intent_dim}")
    torch_mode = _is_torch(obs)
    if torch_mode:
        import torch

        f32 = torch.float32
        if out is None:
            out = torch.empty((*batch, cfg.dim), dtype=f32, device=obs.device)
        age = torch.as_tensor(chunk_age_s, device=obs.device).to(f32)
        scale = torch.tensor(cfg.age_scale_s, dtype=f32, device=obs.device)
        age = torch.clamp(age / scale, 0.0, cfg.age_clip) + 0.0  # + 0.0: -0.0 -> +0.0
        has = torch.as_tensor(has_chunk, device=obs.device).to(f32)
    else:
        f32 = np.float32
        if out is None:
            out = np.empty((*batch, cfg.dim), dtype=f32)
        age = np.asarray(chunk_age_s).astype(f32, copy=False) / f32(cfg.age_scale_s)
        # + 0.0 turns a -0.0 age into +0.0: clip keeps -0.0 on numpy 2 but not on numpy 1.21
        age = np.clip(age, f32(0.0), f32(cfg.age_clip)) + f32(0.0)
        has = np.asarray(has_chunk).astype(f32, copy=False)
    if tuple(out.shape) != (*batch, cfg.dim):
        raise ValueError(f"out has shape {tuple(out.shape)}, expected {(*batch, cfg.dim)}")

    seg = {name: (start, stop) for name, start, stop in cfg.layout()}
    o0, o1 = seg["obs"]
    c0, c1 = seg["chunk_now"][0], seg["chunk_next"][1]
    g0, _ = seg["chunk_age"]
    k0, k1 = seg["committed"]
    h0, _ = seg["has_chunk"]
    if cfg.full_observation:
        out[..., o0:o1] = obs
    elif torch_mode:
        out[..., o0:o1] = select_fast_obs(obs, cfg)
    else:
        np.take(obs, cfg.obs_indices, axis=-1, out=out[..., o0:o1], mode="clip")
    used = has[..., None] != 0  # the chunk's values where used, exactly +0.0 elsewhere
    zero = torch.zeros((), dtype=f32, device=obs.device) if torch_mode else f32(0.0)
    where = torch.where if torch_mode else np.where
    out[..., c0:c1] = where(used, chunk_rows.reshape(*batch, n_rows * a_dim), zero)
    out[..., g0] = age * has
    out[..., k0:k1] = committed.reshape(*batch, k * a_dim)
    out[..., h0] = has
    if cfg.intent_dim:
        i0, i1 = seg["intent"]
        if intent is None:
            out[..., i0:i1] = 0.0
        else:
            out[..., i0:i1] = where(used, intent.reshape(*batch, cfg.intent_dim), zero)
    return out


class EditObsWriter:
    """:func:`build_edit_obs` for one numpy sample into a fixed ``(D,)`` buffer, the layout
    resolved once: the runtime's per-tick builder (a few C calls instead of ~25; the result
    is bitwise the same, a test checks it against :func:`build_edit_obs`).

    Args:
        cfg: Sizes and scales.
        out: ``(D,)`` float32 buffer the writer fills (e.g. the network's input row).
    """

    def __init__(self, cfg: EditObsConfig, out: np.ndarray) -> None:
        if out.shape != (cfg.dim,) or out.dtype != np.float32:
            raise ValueError(f"out must be ({cfg.dim},) float32, got {out.shape} {out.dtype}")
        seg = {name: (start, stop) for name, start, stop in cfg.layout()}
        self.cfg, self.out = cfg, out
        self._obs = out[slice(*seg["obs"])]
        self._chunk = out[seg["chunk_now"][0]:seg["chunk_next"][1]]
        self._committed = out[slice(*seg["committed"])]
        self._age_i, self._has_i = seg["chunk_age"][0], seg["has_chunk"][0]
        self._intent = out[slice(*seg["intent"])] if cfg.intent_dim else None
        self._idx = None if cfg.full_observation else np.asarray(cfg.obs_indices, np.intp)
        self._scale, self._clip = np.float32(cfg.age_scale_s), np.float32(cfg.age_clip)
        self._zero, self._one = np.float32(0.0), np.float32(1.0)

    def write(self, obs: np.ndarray, chunk_rows: np.ndarray, chunk_age_s: float,
              committed: np.ndarray, has_chunk: bool,
              intent: np.ndarray | None = None) -> np.ndarray:
        """Fill :attr:`out` from ``obs`` ``(O,)``, C-contiguous ``chunk_rows`` ``(1 + L, A)``
        and ``committed`` ``(K, A)`` float32 (the caller's fixed buffers: shapes are not
        checked per call), ``chunk_age_s`` (s), ``has_chunk`` and the chunk's ``intent``
        ``(I,)`` float32 (``None`` = zeros); returns :attr:`out`."""
        has = self._one if has_chunk else self._zero
        if self._idx is None:
            self._obs[...] = obs
        else:
            np.take(obs, self._idx, out=self._obs, mode="clip")
        if has_chunk:
            self._chunk[...] = chunk_rows.reshape(-1)
        else:
            self._chunk[...] = self._zero
        # np.clip's rule on a float32 scalar (NaN kept), then -0.0 -> +0.0 as build_edit_obs
        age = np.float32(chunk_age_s) / self._scale
        if age < self._zero:
            age = self._zero
        elif age > self._clip:
            age = self._clip
        out = self.out
        out[self._age_i] = (age + self._zero) * has
        self._committed[...] = committed.reshape(-1)
        out[self._has_i] = has
        if self._intent is not None:
            if intent is None or not has_chunk:
                self._intent[...] = self._zero
            else:
                self._intent[...] = intent
        return out


def compose_edit_action(chunk_row: Array, residual: Array, bound: float,
                        out: Array | None = None) -> Array:
    """The edit method's action: ``chunk_row + bound * clip(residual, -1, 1)``.

    The exported network outputs the raw ``residual`` (the PPO actor mean); the training
    wrapper (torch batches) and the runtime (numpy, one sample) both compose with this
    function, so the residual is bounded by ``bound`` per element in both places.

    Args:
        chunk_row: ``(..., A)`` planner action for now.
        residual: ``(..., A)`` network output.
        bound: Largest change the edit may make per element (action units).
        out: Optional preallocated result (numpy only).
    """
    if _is_torch(residual):
        import torch

        return chunk_row + bound * torch.clamp(residual, -1.0, 1.0)
    if out is None:
        out = np.empty(np.shape(residual), dtype=np.float32)
    # np.clip's result for float32 (NaN kept), in two ufunc calls instead of np.clip's wrapper
    np.maximum(residual, _MINUS_ONE, out=out)
    np.minimum(out, _ONE, out=out)
    out *= np.float32(bound)
    out += chunk_row
    return out
