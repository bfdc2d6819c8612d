"""Checks the sim task tests share: a seeded rollout repeats bit for bit (and another seed
changes it); an instruction reaches the critic's observation and not the policy's."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch


def step_tensors(env, steps: int, action: Callable[[], torch.Tensor],
                 obs_keys: Sequence[str] = ("policy",),
                 extras_keys: Sequence[str] = ()) -> list[torch.Tensor]:
    """Run ``steps`` env steps with ``action()`` each and collect, per step, the observation
    groups ``obs_keys``, the reward, the dones and the extras ``extras_keys``, in that order."""
    out: list[torch.Tensor] = []
    for _ in range(steps):
        obs, reward, dones, extras = env.step(action())
        out += [*(obs[k] for k in obs_keys), reward, dones, *(extras[k] for k in extras_keys)]
    return out


def assert_seed_decides(rollout: Callable[[int], list[torch.Tensor]], seed: int,
                        other_seed: int) -> None:
    """``rollout(seed)`` twice gives bitwise identical tensors; ``rollout(other_seed)`` does
    not."""
    a, b, c = rollout(seed), rollout(seed), rollout(other_seed)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, c))


def assert_instruction_only_in_critic(env, new_ids: np.ndarray) -> None:
    """Setting every env's instruction to ``new_ids`` (int64, (num_envs,), each different from
    the current one) leaves the ``"policy"`` observation as it was and changes the
    ``"critic"``'s."""
    obs = env.get_observations()
    env.set_instruction(np.arange(env.num_envs), new_ids)
    obs2 = env.get_observations()
    assert torch.equal(obs["policy"], obs2["policy"])
    assert not torch.equal(obs["critic"], obs2["critic"])
