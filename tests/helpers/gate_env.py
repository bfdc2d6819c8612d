"""The gate tests' stamping task and budget set (on the latency tests' clock env)."""

from __future__ import annotations

import torch

from edgerl.sim.gate.budgets import KEEP, PlanBudget
from tests.helpers.latency_env import StepEnv

BUDGETS = (KEEP, PlanBudget("fast", delay=1, horizon=4, cost=0.5),
           PlanBudget("slow", delay=3, horizon=12))


class StampTask(StepEnv):
    """The clock env with an expert whose row i = 1000 * (step + 1) + i."""

    def expert_chunk(self, horizon, env_ids):
        rows = torch.arange(horizon, dtype=torch.float32)
        step = self.episode_length_buf[env_ids].float()
        return (1000.0 * (step[:, None] + 1.0) + rows[None, :])[..., None]
