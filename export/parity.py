"""Parity: does the exported graph compute what the torch actor computes?

Feed-forward actors are compared on every parity observation (batch 1, the device graph).
Recurrent actors are compared over rollouts of ``rollout_len`` steps in which both sides feed
their *own* state output back, so a drift that accumulates over time is caught, not hidden.
Each output gets its max abs error and the tolerance it was held to.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "FP16_TOL",
    "FP32_TOL",
    "fp32_tolerance_for",
    "MIN_PARITY_OBS",
    "MIN_ROLLOUT",
    "OutputParity",
    "ParityReport",
    "check_parity",
    "max_abs_err",
    "random_observations",
    "record_observations",
]

log = logging.getLogger(__name__)

#: Max abs error allowed for a float32 graph (acceptance criterion).
FP32_TOL = 1e-5
#: Max abs error allowed for a float16-compute graph (half has ~3 decimal digits).
FP16_TOL = 2e-2
MIN_PARITY_OBS = 1000
MIN_ROLLOUT = 50

Runner = Callable[[Sequence[np.ndarray]], Sequence[np.ndarray]]


def fp32_tolerance_for(outputs: np.ndarray) -> float:
    """``FP32_TOL`` scaled by the largest ``|output|`` (at least 1) of the reference model on
    the parity observations: fp32 round-off grows with the outputs' size, and a network whose
    outputs reach tens or hundreds on wide random inputs (a re-fitted edit network, a
    long-trained gate's logits) is below fp32 resolution at 1e-5 absolute."""
    return FP32_TOL * max(1.0, float(np.abs(np.asarray(outputs)).max(initial=0.0)))


@dataclass
class OutputParity:
    """One graph output: max abs error over every compared element, and its tolerance."""

    name: str
    max_abs_err: float
    tolerance: float

    @property
    def ok(self) -> bool:
        """True when within tolerance (NaN counts as a failure)."""
        return bool(self.max_abs_err <= self.tolerance)


@dataclass
class ParityReport:
    """Result of comparing a reference (torch) and a candidate (onnxruntime, TensorRT)."""

    reference: str
    candidate: str
    n_observations: int
    n_rollouts: int
    rollout_len: int
    outputs: list[OutputParity] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def max_abs_err(self) -> float:
        return max((o.max_abs_err for o in self.outputs), default=0.0)

    def failures(self) -> list[str]:
        """One line per output over tolerance."""
        return [f"{o.name}: max abs error {o.max_abs_err:.3g} > tolerance {o.tolerance:.3g}"
                for o in self.outputs if not o.ok]

    def to_dict(self) -> dict[str, Any]:
        return {
            "reference": self.reference, "candidate": self.candidate,
            "n_observations": self.n_observations, "n_rollouts": self.n_rollouts,
            "rollout_len": self.rollout_len, "ok": self.ok,
            "outputs": [{"name": o.name, "max_abs_err": o.max_abs_err, "tolerance": o.tolerance,
                         "ok": o.ok} for o in self.outputs],
        }


def max_abs_err(a: np.ndarray, b: np.ndarray) -> float:
    """Max |a - b| in float64; NaN where only one side is NaN (NaN on both sides matches)."""
    if a.shape != b.shape:
        raise ValueError(f"output shapes differ: {a.shape} vs {b.shape}")
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    if diff.size == 0:
        return 0.0
    if not np.all(np.isfinite(diff)):
        both_nan = np.isnan(a) & np.isnan(b)
        if not np.all(np.isfinite(diff) | both_nan):
            return float("nan")
        diff = np.where(both_nan, 0.0, diff)
    return float(diff.max())


def check_parity(reference: Runner, candidate: Runner, observations: np.ndarray, *,
                 output_names: Sequence[str], zero_state: Sequence[np.ndarray] = (),
                 tolerance: float = FP32_TOL, rollout_len: int = 100,
                 reference_name: str = "torch", candidate_name: str = "onnxruntime",
                 ) -> ParityReport:
    """Compare two runners on ``observations`` (N, D) float32, one batch-1 call per step.

    A runner maps ``[obs (1, D), *state]`` to ``[action (1, A), *state_out]``. With
    recurrent state (``zero_state`` non-empty) the observations are cut into rollouts of
    ``rollout_len`` steps, each starting from ``zero_state``, and each side feeds its own
    state output back in.
    """
    obs = np.ascontiguousarray(observations, dtype=np.float32)
    if obs.ndim != 2 or obs.shape[0] == 0:
        raise ValueError(f"parity observations must be (N, D) with N >= 1, got {obs.shape}")
    recurrent = len(zero_state) > 0
    if recurrent and rollout_len < 1:
        raise ValueError("rollout_len must be >= 1")
    n_out = len(output_names)
    errs = np.zeros(n_out)
    n_rollouts = 0
    ref_state = cand_state = list(zero_state)
    for i in range(obs.shape[0]):
        if recurrent and i % rollout_len == 0:
            ref_state = [s.copy() for s in zero_state]
            cand_state = [s.copy() for s in zero_state]
            n_rollouts += 1
        x = obs[i:i + 1]
        ref = list(reference([x, *ref_state]))
        cand = list(candidate([x, *cand_state]))
        if len(ref) != n_out or len(cand) != n_out:
            raise ValueError(f"expected {n_out} outputs ({list(output_names)}), got "
                             f"{len(ref)} from {reference_name} and {len(cand)} from "
                             f"{candidate_name}")
        for k in range(n_out):
            errs[k] = np.maximum(errs[k], max_abs_err(ref[k], cand[k]))  # NaN propagates
        if recurrent:
            ref_state, cand_state = ref[1:], cand[1:]
    report = ParityReport(reference=reference_name, candidate=candidate_name,
                          n_observations=int(obs.shape[0]), n_rollouts=n_rollouts,
                          rollout_len=rollout_len if recurrent else 0,
                          outputs=[OutputParity(name, float(e), tolerance)
                                   for name, e in zip(output_names, errs)])
    log.info("parity %s vs %s on %d observations: max abs error %.3g (tol %.1g)",
             reference_name, candidate_name, report.n_observations, report.max_abs_err,
             tolerance)
    return report


def random_observations(n: int, dim: int, *, scale: np.ndarray | float = 1.0,
                        center: np.ndarray | float = 0.0, seed: int = 0) -> np.ndarray:
    """(n, dim) float32 observations ``center + scale * N(0, 1)`` (beyond the training range
    on purpose: parity must hold where the robot may take the policy)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)) * np.asarray(scale, dtype=np.float64) + center
    return x.astype(np.float32)


def record_observations(env: Any, n: int, *, seed: int = 0,
                        action_low: Sequence[float] | None = None,
                        action_high: Sequence[float] | None = None) -> np.ndarray:
    """Record ``n`` observations (N, D) float32 from an rsl_rl-style VecEnv.

    Steps the env with uniform random actions in ``[action_low, action_high]`` (default
    ``[-1, 1]``); reads ``get_observations()["policy"]`` (a dict-like or a tensor).
    """
    import torch

    rng = torch.Generator().manual_seed(seed)
    if hasattr(env, "seed"):
        env.seed(seed)
    num_actions = int(env.num_actions)
    low = torch.tensor(action_low if action_low is not None else [-1.0] * num_actions)
    high = torch.tensor(action_high if action_high is not None else [1.0] * num_actions)
    rows: list[np.ndarray] = []
    total = 0

    def _policy_obs(obs: Any) -> np.ndarray:
        if not isinstance(obs, torch.Tensor):
            obs = obs["policy"]
        return obs.detach().to("cpu", torch.float32).numpy().reshape(obs.shape[0], -1)

    obs = env.reset() if hasattr(env, "reset") else env.get_observations()
    if obs is None:
        obs = env.get_observations()
    while total < n:
        batch = _policy_obs(obs)
        rows.append(batch)
        total += batch.shape[0]
        u = torch.rand(int(env.num_envs), num_actions, generator=rng)
        actions = (low + (high - low) * u).to(getattr(env, "device", "cpu"))
        obs = env.step(actions)[0]
    return np.concatenate(rows)[:n].astype(np.float32)
