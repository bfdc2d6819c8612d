"""edgerl.policies: planners, the edit policy and baselines, trained with rsl-rl-lib PPO."""

from __future__ import annotations
