"""The dm_control adapter: names, the split by observation key, episode semantics, errors."""

from __future__ import annotations

import pytest
import torch

from edgerl.sim.adapters.dm_control import (
    DmcAdapterError,
    DmcVecEnv,
    expand_planner_only,
    split_name,
)
from edgerl.sim.registry import get_task_info, make_task

pytest.importorskip("dm_control")


def test_reacher_spec_names_and_the_split_by_key():
    env = make_task("dmc:reacher-easy", num_envs=2, seed=0, planner_only=["to_target"])
    try:
        spec = env.spec
        assert spec.obs_names == ["position[0]", "position[1]", "to_target[0]", "to_target[1]",
                                  "velocity[0]", "velocity[1]"]
        assert spec.planner_only == ["to_target[0]", "to_target[1]"]
        assert spec.fast_obs_indices == [0, 1, 4, 5]
        assert (spec.control_hz, spec.max_episode_steps) == (50.0, 1000)
        assert (spec.action_low, spec.action_high) == ([-1.0, -1.0], [1.0, 1.0])
        obs = env.get_observations()["policy"]
        assert obs.shape == (2, 6) and obs.dtype == torch.float32
        assert not torch.equal(obs[0], obs[1])  # env i is seeded seed + i
    finally:
        env.close()
    info = get_task_info("dmc:reacher-easy")
    assert (info.backend, info.obs_dim, info.action_dim) == ("dm_control", 6, 2)


def test_an_episode_ends_as_a_time_out_with_same_step_reset():
    env = DmcVecEnv("reacher-easy", num_envs=2, seed=3)
    try:
        zeros = torch.zeros(2, 2)
        for _ in range(999):
            _, rew, dones, extras = env.step(zeros)
            assert not dones.any()
            assert ((rew >= 0) & (rew <= 1)).all()
        before = env.get_observations()["policy"].clone()
        obs, _, dones, extras = env.step(zeros)
        assert dones.tolist() == [1, 1] and extras["time_outs"].tolist() == [True, True]
        assert env.episode_length_buf.tolist() == [0, 0]
        # the returned observation starts the next episode; the last one is kept aside
        assert not torch.equal(obs["policy"], env.final_obs)
        assert torch.allclose(env.final_obs[:, 4:], before[:, 4:], atol=1.0)
        reset = env.reset(torch.tensor([1]))["policy"]
        assert env.episode_length_buf.tolist() == [0, 0] and reset.shape == (2, 6)
    finally:
        env.close()


def test_actions_are_clipped_and_checked():
    env = DmcVecEnv("reacher-easy", num_envs=1)
    try:
        env.step(torch.tensor([[5.0, -5.0]]))  # clipped to the spec, no error
        with pytest.raises(ValueError):
            env.step(torch.zeros(1, 3))
    finally:
        env.close()


@pytest.mark.parametrize(("name", "message"), [
    ("reacher", "dmc:<domain>-<task>"),
    ("dmc:reacher-impossible", "dm_control has no task reacher-impossible"),
])
def test_bad_names_are_refused_with_the_reason(name, message):
    with pytest.raises(DmcAdapterError, match=message):
        DmcVecEnv(name)


def test_split_and_planner_only_entries():
    assert split_name("dmc:finger-turn_easy") == ("finger", "turn_easy")
    names = ["a[0]", "a[1]", "b", "c[0]"]
    assert expand_planner_only(["a", 3, "b"], names) == ["a[0]", "a[1]", "c[0]", "b"]
    assert expand_planner_only(["a[1]", "a"], names) == ["a[1]", "a[0]"]
    with pytest.raises(DmcAdapterError, match="neither an index"):
        expand_planner_only(["z"], names)
    with pytest.raises(DmcAdapterError, match="outside the observation"):
        expand_planner_only([7], names)
