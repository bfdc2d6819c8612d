"""``BudgetGate``: the planning-budget gate (``gate.onnx``) in the runtime, without torch.

At each decision point the gate reads runtime state: the newest robot observation, the chunk
buffer's current chunk (its age, the row it runs now, its rows) and whether a requested plan
is still in flight; it builds the gate observation with the contract's
:func:`edgerl.contract.gate_obs.build_gate_obs` (the one the sim's ``GatedEnv`` calls) and returns
the
budget whose score is highest, or (``gate:sample``) one drawn from a categorical gate's
``softmax`` with a seeded generator: the stochastic policy PPO trained, whose mode can be a
poor policy (docs/results.md: the mode of the ``calm_kicks`` gate keeps its plans until they
run out). The planner client acts on it
(:class:`edgerl.runtime.gate.client.GatedPlannerClient`). The baselines it is compared with
choose through the same interface (:class:`FixedChoice`, :class:`AgeHeuristic`;
:func:`make_chooser` parses ``gate`` / ``gate:sample`` / ``fixed:NAME`` / ``age:NAME:X``).

Times: the plan state is taken at ``t`` (the observation's stamp). A chunk's ``obs_time`` and
``t0`` are stamps of earlier observations on the same control grid, so the steps between them
are rounded to whole steps (:func:`steps_between`), as the sim counts them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgerl.contract.bundle_files import read_member
from edgerl.contract.chunk import ActionChunk
from edgerl.contract.gate_obs import (
    GateBudgetSpec,
    GateSpec,
    budget_probabilities,
    build_gate_obs,
    choose_budget,
    sample_budget,
)
from edgerl.contract.spec import PolicySpec

__all__ = ["GATE_MODES", "AgeHeuristic", "BudgetChooser", "BudgetGate", "FixedChoice", "PlanState",
           "make_chooser", "plan_state", "steps_between"]

log = logging.getLogger(__name__)

#: How :class:`BudgetGate` turns the network's outputs into a choice.
GATE_MODES = ("greedy", "sample")
_SAMPLE_STREAM = 1  # SeedSequence key of the sample draws (a seed's other uses: other keys)


def steps_between(t: float, t0: float, dt: float) -> int:
    """Whole control steps from stamp ``t0`` to stamp ``t`` (both on the control grid)."""
    return int(round((t - t0) / dt))


@dataclass(frozen=True)
class PlanState:
    """The current plan as the gate sees it at one time (all in control steps).

    Attributes:
        age_steps: Since the plan's observation. row_offset: Since its first row.
        rows: Its rows (the budget's horizon); 0 = no plan.
        actions: Its rows (H, A) (for a gate with a ``plan_preview``); None = no plan.
    """

    age_steps: int = 0
    row_offset: int = 0
    rows: int = 0
    actions: np.ndarray | None = None


def plan_state(chunk: ActionChunk | None, t: float, dt: float) -> PlanState:
    """The :class:`PlanState` of ``chunk`` (the buffer's current one, or None) at ``t``."""
    if chunk is None:
        return PlanState()
    return PlanState(age_steps=steps_between(t, chunk.obs_time, dt),
                     row_offset=steps_between(t, chunk.t0, dt), rows=int(chunk.horizon),
                     actions=chunk.actions)


class BudgetChooser:
    """Chooses a budget at a decision point; counts its choices. Subclasses: the network
    (:class:`BudgetGate`) and the baselines (:class:`FixedChoice`, :class:`AgeHeuristic`).

    Attributes:
        gate: The manifest's :class:`~edgerl.contract.gate_obs.GateSpec`. dt: Control period (s).
        counts: Decisions per budget name. last_obs: The newest gate observation (F + 4,).
    """

    name = "chooser"

    def __init__(self, spec: PolicySpec) -> None:
        if spec.gate is None:
            raise ValueError("the manifest has no gate section (`edgerl gate export`)")
        self.gate: GateSpec = spec.gate
        self.dt = spec.control_dt
        self.counts = {b.name: 0 for b in self.gate.budgets}
        self.last_obs = np.zeros(self.gate.dim, np.float32)

    @property
    def budgets(self) -> list[GateBudgetSpec]:
        return self.gate.budgets

    def index(self, name: str) -> int:
        """The index of budget ``name``; ``ValueError`` naming the budgets otherwise."""
        if name not in self.gate.names:
            raise ValueError(f"no budget named {name!r}; budgets: {', '.join(self.gate.names)}")
        return self.gate.names.index(name)

    def observe(self, robot: np.ndarray, plan: PlanState, in_flight: bool) -> np.ndarray:
        """The gate observation (F + 4,) float32 (into :attr:`last_obs`)."""
        rows = plan.actions
        if rows is None and self.gate.preview_steps:
            rows = np.zeros((1, self.gate.action_dim), np.float32)  # no plan: preview is 0
        return build_gate_obs(np.asarray(robot, np.float32), np.int64(plan.age_steps),
                              np.int64(plan.row_offset), np.int64(plan.rows),
                              np.bool_(in_flight), self.gate, out=self.last_obs, chunk=rows)

    def choose(self, robot: np.ndarray, plan: PlanState, in_flight: bool) -> int:
        raise NotImplementedError

    def decide(self, robot: np.ndarray, plan: PlanState, in_flight: bool) -> int:
        """The chosen budget's index, counted."""
        j = self.choose(robot, plan, in_flight)
        self.counts[self.gate.budgets[j].name] += 1
        return j


class BudgetGate(BudgetChooser):
    """``gate.onnx`` from a bundle (hash-checked as read) on an onnxruntime CPU session.

    Two ways to choose from the network's outputs:

    * ``greedy``: the budget with the highest output (ties: the first): the mode;
    * ``sample``: a draw from ``softmax(outputs)`` with the gate's own seeded generator: the
      stochastic policy PPO trained (only for a manifest whose ``gate.outputs`` is
      ``logits``, i.e. a categorical head). The draws are reproducible for a given seed and
      sequence of decisions.

    Args:
        bundle_dir: The bundle. spec: Its manifest (must have a ``gate`` section).
        mode: ``greedy`` or ``sample``. seed: Seed of the ``sample`` draws.

    Attributes:
        last_scores: The network's outputs (B,) at the last decision.
        last_probabilities: Their softmax (B,) at the last ``sample`` decision.
    """

    name = "gate"

    def __init__(self, bundle_dir: str | Path, spec: PolicySpec, mode: str = "greedy",
                 seed: int = 0) -> None:
        import onnxruntime as ort

        if spec.gate is None:
            raise ValueError(f"{bundle_dir}: the manifest has no gate section")
        if mode not in GATE_MODES:
            raise ValueError(f"gate mode {mode!r}: expected one of {', '.join(GATE_MODES)}")
        if mode == "sample" and spec.gate.outputs != "logits":
            raise ValueError(f"{bundle_dir}: the gate's outputs are {spec.gate.outputs!r}, not "
                             "'logits' (a Gaussian-head gate, or exported before `gate.outputs` "
                             "existed): only its argmax means something, so it cannot be "
                             "sampled; re-export a categorical gate or use the greedy gate")
        super().__init__(spec)
        data = read_member(Path(bundle_dir), self.gate.file, spec.files)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
        from edgerl.runtime.onnx_check import check_gate_io

        check_gate_io(Path(bundle_dir) / self.gate.file, self.session, spec)
        self.mode = mode
        self.name = "gate" if mode == "greedy" else "gate:sample"
        # a stream of its own: the planner client seeds its delay draws with the same seed
        self.rng = np.random.default_rng([int(seed), _SAMPLE_STREAM])
        self.last_scores = np.zeros(len(self.gate.budgets), np.float32)
        self.last_probabilities = np.zeros(len(self.gate.budgets), np.float64)

    def scores(self, gate_obs: np.ndarray) -> np.ndarray:
        """The network's outputs (B,) for one gate observation."""
        out = self.session.run([self.gate.output], {self.gate.input: gate_obs[None, :]})[0]
        self.last_scores = np.asarray(out, np.float32).reshape(-1)
        return self.last_scores

    def choose(self, robot: np.ndarray, plan: PlanState, in_flight: bool) -> int:
        scores = self.scores(self.observe(robot, plan, in_flight))
        if self.mode == "greedy":
            return int(choose_budget(scores))
        self.last_probabilities = budget_probabilities(scores)
        return sample_budget(scores, float(self.rng.random()))


class FixedChoice(BudgetChooser):
    """Baseline: always budget ``budget`` (a request every decision)."""

    def __init__(self, spec: PolicySpec, budget: str) -> None:
        super().__init__(spec)
        self.j = self.index(budget)
        self.name = f"fixed:{budget}"

    def choose(self, robot: np.ndarray, plan: PlanState, in_flight: bool) -> int:
        self.observe(robot, plan, in_flight)
        return self.j


class AgeHeuristic(BudgetChooser):
    """Baseline: budget ``budget`` when there is no usable plan or it is older than
    ``max_age`` steps, and nothing is in flight; else keep (the sim's ``age_heuristic``)."""

    def __init__(self, spec: PolicySpec, budget: str, max_age: int) -> None:
        super().__init__(spec)
        self.j = self.index(budget)
        keep = [j for j, b in enumerate(self.budgets) if b.keep]
        if not keep:
            raise ValueError("the age heuristic needs a keep budget")
        self.keep, self.max_age = keep[0], int(max_age)
        self._has_chunk = self.gate.position("has_chunk")
        self.name = f"age>{max_age}:{budget}"

    def choose(self, robot: np.ndarray, plan: PlanState, in_flight: bool) -> int:
        x = self.observe(robot, plan, in_flight)
        old = x[self._has_chunk] == 0 or plan.age_steps > self.max_age
        return self.j if old and not in_flight else self.keep


def make_chooser(bundle_dir: str | Path, spec: PolicySpec, policy: str = "gate",
                 seed: int = 0) -> BudgetChooser:
    """``gate`` (the bundle's network, greedy), ``gate:sample`` (the network, sampled with a
    generator seeded by ``seed``), ``fixed:NAME`` or ``age:NAME:X`` (baselines)."""
    kind, _, rest = policy.partition(":")
    try:
        if kind == "gate" and rest in ("", *GATE_MODES):
            return BudgetGate(bundle_dir, spec, rest or "greedy", seed)
        if kind == "fixed" and rest:
            return FixedChoice(spec, rest)
        name, _, age = rest.partition(":")
        if kind == "age" and name and age:
            return AgeHeuristic(spec, name, int(age))
    except ValueError as exc:
        raise ValueError(f"gate policy {policy!r}: {exc}") from None
    raise ValueError(f"gate policy {policy!r}: expected gate, gate:sample, fixed:NAME or "
                     "age:NAME:STEPS")
