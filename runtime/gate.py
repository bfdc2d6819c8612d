"""``BudgetGate``: the planning-budget gate (``gate.onnx``) in the runtime, without torch.

At each decision point the gate reads runtime state: the newest robot observation, the chunk
buffer's current chunk (its age, the row it runs now, its rows) and whether a requested plan
is still in flight; it builds the gate observation with the contract's
:func:`edgerl.gate_obs.build_gate_obs` (the one the sim's ``GatedEnv`` calls) and returns the
budget whose score is highest. The planner client acts on it
(:class:`edgerl.runtime.planners.gated.GatedPlannerClient`).

Times: the plan state is taken at ``t`` (the observation's stamp). A chunk's ``obs_time`` and
``t0`` are stamps of earlier observations on the same control grid, so the steps between them
are rounded to whole steps (:func:`steps_between`), as the sim counts them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgerl.bundle_files import read_member
from edgerl.chunk import ActionChunk
from edgerl.gate_obs import GateBudgetSpec, GateSpec, build_gate_obs
from edgerl.spec import PolicySpec

__all__ = ["BudgetGate", "PlanState", "plan_state", "steps_between"]

log = logging.getLogger(__name__)


def steps_between(t: float, t0: float, dt: float) -> int:
    """Whole control steps from stamp ``t0`` to stamp ``t`` (both on the control grid)."""
    return int(round((t - t0) / dt))


@dataclass(frozen=True)
class PlanState:
    """The current plan as the gate sees it at one time (all in control steps).

    Attributes:
        age_steps: Since the plan's observation. row_offset: Since its first row.
        rows: Its rows (the budget's horizon); 0 = no plan.
    """

    age_steps: int = 0
    row_offset: int = 0
    rows: int = 0


def plan_state(chunk: ActionChunk | None, t: float, dt: float) -> PlanState:
    """The :class:`PlanState` of ``chunk`` (the buffer's current one, or None) at ``t``."""
    if chunk is None:
        return PlanState()
    return PlanState(age_steps=steps_between(t, chunk.obs_time, dt),
                     row_offset=steps_between(t, chunk.t0, dt), rows=int(chunk.horizon))


class BudgetGate:
    """``gate.onnx`` from a bundle (hash-checked as read) on an onnxruntime CPU session.

    Args:
        bundle_dir: The bundle. spec: Its manifest (must have a ``gate`` section).

    Attributes:
        gate: The manifest's :class:`~edgerl.gate_obs.GateSpec`.
        counts: Decisions per budget name.
        last_obs / last_scores: The newest gate observation (F + 4,) and scores (B,).
    """

    def __init__(self, bundle_dir: str | Path, spec: PolicySpec) -> None:
        import onnxruntime as ort

        if spec.gate is None:
            raise ValueError(f"{bundle_dir}: the manifest has no gate section")
        self.gate: GateSpec = spec.gate
        data = read_member(Path(bundle_dir), self.gate.file, spec.files)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
        from edgerl.runtime.onnx_check import check_gate_io

        check_gate_io(Path(bundle_dir) / self.gate.file, self.session, spec)
        self.dt = spec.control_dt
        self.counts = {b.name: 0 for b in self.gate.budgets}
        self.last_obs = np.zeros(self.gate.dim, np.float32)
        self.last_scores = np.zeros(len(self.gate.budgets), np.float32)

    @property
    def budgets(self) -> list[GateBudgetSpec]:
        return self.gate.budgets

    def observe(self, robot: np.ndarray, plan: PlanState, in_flight: bool) -> np.ndarray:
        """The gate observation (F + 4,) float32 (into :attr:`last_obs`)."""
        return build_gate_obs(np.asarray(robot, np.float32), np.int64(plan.age_steps),
                              np.int64(plan.row_offset), np.int64(plan.rows),
                              np.bool_(in_flight), self.gate, out=self.last_obs)

    def scores(self, gate_obs: np.ndarray) -> np.ndarray:
        """The network's scores (B,) for one gate observation."""
        out = self.session.run([self.gate.output], {self.gate.input: gate_obs[None, :]})[0]
        self.last_scores = np.asarray(out, np.float32).reshape(-1)
        return self.last_scores

    def decide(self, robot: np.ndarray, plan: PlanState, in_flight: bool) -> int:
        """The chosen budget's index (highest score; ties: the first), counted."""
        j = int(np.argmax(self.scores(self.observe(robot, plan, in_flight))))
        self.counts[self.gate.budgets[j].name] += 1
        return j
