"""edgerl.policies: planners, the edit policy and baselines, trained with rsl-rl-lib PPO.

Importing the package registers how a stored training run is loaded as a task's expert
(:func:`edgerl.sim.adapters.run_loader.set_run_loader`; no heavy imports), so a task whose
expert is a trained run (``expert_run=RUN``) can be built from any policies entry point.
"""

from __future__ import annotations

from typing import Any

from edgerl.sim.adapters.run_loader import set_run_loader


def _load_run(run_dir: Any, device: str) -> Any:
    """A stored run's policy (:func:`edgerl.policies.runs.load_policy`), imported on first use."""
    from edgerl.policies.runs import load_policy

    return load_policy(run_dir, device=device)


set_run_loader(_load_run)
