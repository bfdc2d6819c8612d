"""Fitting the simulator's delay model (:class:`~edgerl.contract.spec.LatencyModel`) from measured
planner latency, and saving / loading it as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from edgerl.contract.serde import from_dict, to_dict
from edgerl.contract.spec import LatencyModel

__all__ = [
    "delay_distribution",
    "latency_model_from_samples",
    "load_latency_model",
    "save_latency_model",
]


def delay_distribution(latencies_s: np.ndarray, control_dt: float) -> list[float]:
    """Probabilities over planner delays ``D = 0, 1, 2...`` control steps.

    A chunk whose observation was taken at tick ``k`` and which arrives ``L`` seconds later is
    first usable at tick ``k + ceil(L / control_dt)``, so ``D = ceil(L / dt)`` (``L = 0`` only
    for a planner that answers instantly). This is the convention of the sim wrappers'
    ``LatencyModel.delay_distribution``.
    """
    lat = np.asarray(latencies_s, dtype=np.float64).reshape(-1)
    if lat.size == 0 or not np.all(np.isfinite(lat)) or np.any(lat < 0):
        raise ValueError("need at least one finite, non-negative latency sample")
    if not control_dt > 0:
        raise ValueError(f"control_dt must be > 0, got {control_dt}")
    steps = np.ceil(lat / control_dt - 1e-9).astype(np.int64)
    counts = np.bincount(steps)
    probs = counts / counts.sum()
    probs[-1] += 1.0 - probs.sum()  # exact sum despite float rounding
    return [float(p) for p in probs]


def latency_model_from_samples(latencies_s: np.ndarray, control_dt: float,
                               period_steps: int) -> LatencyModel:
    """A :class:`~edgerl.contract.spec.LatencyModel` with the measured delay distribution; its
    ``planner_delay_steps`` is the median delay (used where a fixed D is needed)."""
    probs = delay_distribution(latencies_s, control_dt)
    median = int(np.searchsorted(np.cumsum(probs), 0.5))
    return LatencyModel(planner_delay_steps=median, planner_period_steps=max(1, period_steps),
                        delay_distribution=probs)


def save_latency_model(model: LatencyModel, path: str | Path) -> Path:
    """Write ``model`` as JSON (the ``latency`` object of a manifest)."""
    path = Path(path)
    path.write_text(json.dumps(to_dict(model), indent=2) + "\n")
    return path


def load_latency_model(path: str | Path) -> LatencyModel:
    """Read a file written by :func:`save_latency_model` (or ``edgerl bench planner
    --write-latency-model``); raises ``SchemaError`` naming a bad field."""
    return from_dict(LatencyModel, json.loads(Path(path).read_text()), "latency")
