"""The planning-budget gate's contract: its manifest section and its observation, defined once
for training (torch batches, :class:`~edgerl.sim.gate.env.GatedEnv`) and deployment
(numpy single samples, :class:`~edgerl.runtime.gate.budget_gate.BudgetGate`).

The gate observation::

    [ fast obs (F) | chunk_age | rows_left | has_chunk | in_flight | plan_preview (P*A) ]

* fast obs: the robot observation at ``GateSpec.fast_indices`` (the task's non-planner-only
  elements);
* ``chunk_age``: steps since the current plan's observation was taken, / ``age_scale``;
* ``rows_left``: the plan's rows (its budget's horizon) minus the row executed now, clamped
  at 0, / ``age_scale``;
* ``has_chunk``: 1 while a plan runs and is usable
(:func:`~edgerl.contract.timing_rules.chunk_usable`
  with the plan's own horizon and ``GateSpec.stale_steps``); age and rows left are 0 without;
* ``in_flight``: 1 while a requested plan has not arrived;
* ``plan_preview`` (only when ``GateSpec.preview_steps`` is not empty): the current plan's
  rows ``preview_steps`` steps from now (``P`` offsets x ``A`` action elements, offset-major),
  0 where the plan will not be usable then or there is none. The plan encodes the road ahead
  as the planner saw it (a swerve coming shows as steering rows).

The gate network outputs one score per budget (``GateSpec.budgets`` order); the budget with
the highest score is run (ties: the first). ``keep`` budgets ask for nothing.

:func:`build_gate_obs` runs on ``numpy.ndarray`` and ``torch.Tensor`` alike (the torch
namespace is used only when a tensor is passed; this module never imports torch). Every
operation is an elementwise float32 op or a copy, so both sides agree bitwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgerl.contract.edit_obs import select_chunk_rows
from edgerl.contract.serde import SchemaError
from edgerl.contract.timing_rules import LatencyModel, chunk_usable

__all__ = ["GATE_EXTRA_OBS", "GATE_FILE", "GATE_OBS_MEANING", "GATE_OUTPUTS", "GATE_PREVIEW_OBS",
           "GateBudgetSpec", "GateSpec", "budget_probabilities", "build_gate_obs", "choose_budget",
           "sample_budget"]

Array = Any  # numpy.ndarray or torch.Tensor

#: The gate network in a bundle (beside ``policy.onnx``).
GATE_FILE = "gate.onnx"
#: Observation elements the gate adds after the fast observation, in order.
GATE_EXTRA_OBS = ("chunk_age", "rows_left", "has_chunk", "in_flight")
#: What a gate network's outputs can be (``GateSpec.outputs``).
GATE_OUTPUTS = ("scores", "logits")
#: The optional element after them (``GateSpec.preview_steps`` not empty).
GATE_PREVIEW_OBS = "plan_preview"
#: One line per element (units, size).
GATE_OBS_MEANING = {
    "chunk_age": "steps since the current plan's observation / age_scale (1)",
    "rows_left": "the plan's rows after the one executed now / age_scale (1)",
    "has_chunk": "1 while a usable plan runs, else 0 (1)",
    "in_flight": "1 while a requested plan has not arrived, else 0 (1)",
    "plan_preview": "the plan's rows preview_steps steps ahead, 0 where unusable (P*A)",
}


@dataclass
class GateBudgetSpec:
    """One budget as the runtime needs it (the sim's ``PlanBudget`` fields).

    Attributes:
        name: Unique label. keep: No request (the current chunk keeps running).
        latency: Query -> arrival delay in control steps (``planner_delay_steps``, jitter or
            a measured distribution; ``planner_period_steps`` is ignored: the gate decides).
        horizon: Rows the plan holds (0 for keep). hold / noise_std / gain / compensate: the
            plan's quality knobs (see ``edgerl.sim.gate.budgets``). cost: Reward price per
            use.
    """

    name: str
    keep: bool = False
    latency: LatencyModel = field(default_factory=LatencyModel)
    horizon: int = 0
    hold: int = 1
    noise_std: float = 0.0
    cost: float = 0.0
    compensate: bool = False
    gain: float = 1.0

    def __post_init__(self) -> None:
        if not self.name:
            raise SchemaError("gate.budgets[].name: must not be empty")
        if not self.keep and self.horizon < 1:
            raise SchemaError(f"gate.budgets[{self.name}].horizon: must be >= 1, got "
                              f"{self.horizon}")
        if self.hold < 1 or self.noise_std < 0 or self.cost < 0 or not 0 <= self.gain <= 1:
            raise SchemaError(f"gate.budgets[{self.name}]: hold must be >= 1, noise_std and "
                              f"cost >= 0, gain in [0, 1]")


@dataclass
class GateSpec:
    """The manifest's ``gate`` section.

    Attributes:
        budgets: The choices; network output ``j`` scores ``budgets[j]``.
        decision_steps: Control steps between decisions (k >= 1).
        fast_indices: Robot-observation elements the gate reads (ascending).
        extra: Names of the elements after them (:data:`GATE_EXTRA_OBS`).
        age_scale: Chunk age and rows left are divided by this (steps).
        stale_steps: A plan is usable until ``row offset >= horizon + stale_steps``.
        file / input / output: The ONNX file and its tensor names.
        preview_steps: Offsets (steps from now) of the ``plan_preview`` rows (empty = none).
        action_dim: A, the plan rows' size (needed with ``preview_steps``).
        outputs: What the network's outputs are: ``"logits"`` (a categorical policy's
            logits: ``softmax`` gives the probabilities PPO trained, so the runtime may sample
            from them) or ``"scores"`` (only their argmax is meaningful; manifests written
            before this field, and Gaussian-head gates).
    """

    budgets: list[GateBudgetSpec]
    decision_steps: int
    fast_indices: list[int]
    extra: list[str] = field(default_factory=lambda: list(GATE_EXTRA_OBS))
    age_scale: float = 20.0
    stale_steps: int = 0
    file: str = GATE_FILE
    input: str = "obs"
    output: str = "scores"
    preview_steps: list[int] = field(default_factory=list)
    action_dim: int = 0
    outputs: str = "scores"

    def __post_init__(self) -> None:
        if self.outputs not in GATE_OUTPUTS:
            raise SchemaError(f"gate.outputs: must be one of {', '.join(GATE_OUTPUTS)}; got "
                              f"{self.outputs!r}")
        self.preview_steps = [int(o) for o in self.preview_steps]
        if any(o < 0 for o in self.preview_steps):
            raise SchemaError(f"gate.preview_steps: must be >= 0, got {self.preview_steps}")
        if self.preview_steps and self.action_dim < 1:
            raise SchemaError("gate.action_dim: must be >= 1 with preview_steps")
        expected = list(GATE_EXTRA_OBS) + ([GATE_PREVIEW_OBS] if self.preview_steps else [])
        if self.preview_steps and list(self.extra) == list(GATE_EXTRA_OBS):
            self.extra = list(expected)
        names = [b.name for b in self.budgets]
        if not names or len(set(names)) != len(names):
            raise SchemaError(f"gate.budgets: need at least one budget, names unique; got "
                              f"{names}")
        if self.decision_steps < 1 or self.stale_steps < 0 or not self.age_scale > 0:
            raise SchemaError("gate: decision_steps must be >= 1, stale_steps >= 0, "
                              "age_scale > 0")
        idx = [int(i) for i in self.fast_indices]
        if sorted(set(idx)) != idx or (idx and idx[0] < 0):
            raise SchemaError(f"gate.fast_indices: must be ascending, unique, >= 0; got {idx}")
        self.fast_indices = idx
        if list(self.extra) != expected:
            raise SchemaError(f"gate.extra: this edgerl builds {expected}, the manifest asks "
                              f"for {list(self.extra)}")

    @property
    def dim(self) -> int:
        """Gate observation size F + 4 (+ P*A with a preview)."""
        return (len(self.fast_indices) + len(GATE_EXTRA_OBS)
                + len(self.preview_steps) * self.action_dim)

    def position(self, name: str) -> int:
        """Index of element ``name`` of :data:`GATE_EXTRA_OBS` in the gate observation (after
        the F fast elements; a ``plan_preview`` follows all four)."""
        return len(self.fast_indices) + GATE_EXTRA_OBS.index(name)

    @property
    def names(self) -> list[str]:
        """Budget names, output order."""
        return [b.name for b in self.budgets]


def build_gate_obs(robot: Array, age_steps: Array, row_offset: Array, plan_rows: Array,
                   in_flight: Array, spec: GateSpec, out: Array | None = None,
                   chunk: Array | None = None) -> Array:
    """The gate observation ``(..., spec.dim)`` float32.

    Args:
        robot: Robot observation ``(..., O)``.
        age_steps: Int ``(...)``: steps since the current plan's observation.
        row_offset: Int ``(...)``: steps since the current plan's first row (its ``step0`` /
            ``t0``; the row executed now, before clipping).
        plan_rows: Int ``(...)``: the current plan's horizon (its budget's), 0 without a plan.
        in_flight: Bool ``(...)``: a requested plan has not arrived.
        spec: The :class:`GateSpec` (indices, scale, stale rule).
        out: Optional preallocated output (numpy only).
        chunk: ``(..., H, A)`` the current plan's rows (row ``i`` for ``step0 + i``); needed
            when ``spec.preview_steps`` is not empty.
    """
    torch_mode = type(robot).__module__.startswith("torch")
    if torch_mode:
        import torch as xp

        def f32(x: Array) -> Array:
            return x.float()
    else:
        xp = np  # type: ignore[assignment]
        robot, age_steps, row_offset, plan_rows, in_flight = (
            np.asarray(x) for x in (robot, age_steps, row_offset, plan_rows, in_flight))

        def f32(x: Array) -> Array:
            return np.asarray(x, np.float32)
    has = (plan_rows > 0) & chunk_usable(row_offset, plan_rows, spec.stale_steps)
    left = plan_rows - row_offset
    age = f32(xp.where(has, age_steps, xp.zeros_like(age_steps)))
    left = f32(xp.where(has & (left > 0), left, xp.zeros_like(left)))
    scale = np.float32(spec.age_scale)
    parts = [f32(robot[..., spec.fast_indices]), (age / scale)[..., None],
             (left / scale)[..., None], f32(has)[..., None], f32(in_flight)[..., None]]
    if spec.preview_steps:
        if chunk is None or chunk.shape[-1] != spec.action_dim:
            raise ValueError(f"gate obs: preview_steps {spec.preview_steps} need the plan's "
                             f"rows (..., H, {spec.action_dim}), got "
                             f"{None if chunk is None else tuple(chunk.shape)}")
        chunk = chunk if torch_mode else np.asarray(chunk)
        for o in spec.preview_steps:
            ahead = row_offset + o
            usable = has & chunk_usable(ahead, plan_rows, spec.stale_steps)
            row = f32(select_chunk_rows(chunk, ahead, 1)[..., 0, :])
            parts.append(row * f32(usable)[..., None])
    if torch_mode:
        return xp.cat(parts, dim=-1)
    return np.concatenate(parts, axis=-1, out=out)


def choose_budget(scores: Array) -> Array:
    """Index of the best score along the last axis (ties: the first), int64."""
    return scores.argmax(-1)


def budget_probabilities(logits: np.ndarray) -> np.ndarray:
    """``softmax(logits)`` (B,) float64: a categorical gate's choice probabilities."""
    z = np.asarray(logits, np.float64).reshape(-1)
    e = np.exp(z - z.max())
    return e / e.sum()


def sample_budget(logits: np.ndarray, u: float) -> int:
    """The budget a categorical gate draws for a uniform number ``u`` in [0, 1): the first
    index whose cumulative probability exceeds ``u`` (inverse-CDF sampling)."""
    cdf = np.cumsum(budget_probabilities(logits))
    return int(min(np.searchsorted(cdf, u, side="right"), cdf.size - 1))
