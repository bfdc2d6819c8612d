"""The gate tests' stamping task and budget set (on the latency tests' clock env)."""

from __future__ import annotations

import torch

from edgerl.policies.gate.policy import GateRunCfg
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


#: Short driving episodes (a 20 m goal) so a whole gate comparison takes seconds.
TINY = {"road_amp": 6.0, "road_wavelength": 70.0, "goal_distance": 20.0,
        "max_episode_steps": 60}


def tiny_cfg(**kwargs) -> GateRunCfg:
    """A gate run on :data:`TINY` episodes: 4 envs, 2 iterations of 4 steps, one 8-unit layer."""
    return GateRunCfg(task_kwargs=dict(TINY), num_envs=4, iterations=2, steps_per_env=4,
                      hidden=[8], **kwargs)
