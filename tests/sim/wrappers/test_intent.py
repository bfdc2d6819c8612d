"""A planner's intent vector through the chunk scheduler into the edit observation."""

from __future__ import annotations

import pytest
import torch

from edgerl.contract.spec import LatencyModel
from edgerl.sim.wrappers import LatencyCfg, LatencyWrapper
from tests.helpers.latency_env import StepEnv

H, NI, D = 6, 3, 2


class IntentPlanner:
    """Chunks of zeros and an intent that names the step it saw: ``[seen step, env, 7]``."""

    intent_dim = NI

    def __call__(self, obs: torch.Tensor, env_ids: torch.Tensor):
        intent = torch.stack([obs[:, 0], obs[:, 1], torch.full_like(obs[:, 0], 7.0)], dim=-1)
        return torch.zeros(obs.shape[0], H, 1), intent


def _wrapper(method: str = "edit", intent_dim: int = NI, planner=None) -> LatencyWrapper:
    cfg = LatencyCfg(method=method, latency=LatencyModel(planner_delay_steps=D,
                                                         planner_period_steps=D),
                     horizon=H, intent_dim=intent_dim, action_low=[-1.0], action_high=[1.0])
    plan = IntentPlanner() if planner is None else planner
    return LatencyWrapper(StepEnv(num_envs=2), cfg, planner=None if method ==
                          "edit_zero_chunks" else plan)


def test_the_edit_observation_ends_with_the_current_chunks_intent():
    env = _wrapper()
    cfg = env.edit_obs_cfg
    assert cfg.intent_dim == NI and cfg.layout()[-1] == ("intent", cfg.dim - NI, cfg.dim)
    seen = []
    for _ in range(7):
        seen.append(env.get_observations()["policy"][:, -NI:].clone())
        env.step(torch.zeros(2, 1))
    # no chunk before the first arrival (step D): zeros; then the intent of the chunk in use,
    # planned D steps earlier at steps 0, 2, 4 (period D)
    assert torch.equal(seen[0], torch.zeros(2, NI)) and torch.equal(seen[1], torch.zeros(2, NI))
    for step in range(D, 7):
        planned = ((step - D) // D) * D
        assert seen[step].tolist() == [[planned, 0.0, 7.0], [planned, 1.0, 7.0]], step


def test_zero_chunks_read_a_zero_intent_of_the_same_size():
    env = _wrapper("edit_zero_chunks")
    assert env.policy_obs_dim == _wrapper().policy_obs_dim
    for _ in range(5):
        env.step(torch.zeros(2, 1))
    assert torch.equal(env.get_observations()["policy"][:, -NI:], torch.zeros(2, NI))


def test_a_planner_intent_of_the_wrong_size_is_refused():
    with pytest.raises(ValueError, match="intent of 3 elements, the latency config expects 2"):
        _wrapper(intent_dim=2)

    class Plain:
        def __call__(self, obs, env_ids):
            return torch.zeros(obs.shape[0], H, 1), torch.zeros(obs.shape[0], 4)

    # claims no intent but returns one: refused at its first query (the wrapper's first step)
    with pytest.raises(ValueError, match="intent vector but the scheduler has intent_dim 0"):
        _wrapper(intent_dim=0, planner=Plain())
