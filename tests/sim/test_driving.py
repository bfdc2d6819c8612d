"""The torch driving task: expert, surfaces, models, collisions, determinism, latency."""

from __future__ import annotations

import pytest
import torch

from edgerl.contract.spec import LatencyModel
from edgerl.sim import make_task
from edgerl.sim.vec_env import ActionError
from edgerl.sim.wrappers import LatencyCfg, make_latency_env


def episode_stats(env, policy, steps):
    succ = fail = 0
    for _ in range(steps):
        _, _, dones, extras = env.step(policy(env))
        succ += int(extras["success"].sum())
        fail += int((dones & ~extras["time_outs"] & ~extras["success"]).sum())
    return succ, fail


@pytest.mark.parametrize("model", ["dynamic", "kinematic"])
def test_expert_completes_on_dry_road_and_zero_control_fails(model):
    env = make_task("driving", num_envs=64, seed=1, model=model, goal_distance=50.0)
    assert env.get_observations()["policy"].shape == (64, 10)
    succ, fail = episode_stats(env, lambda e: e.expert_action(), 150)
    assert succ >= 64 and fail == 0
    env = make_task("driving", num_envs=64, seed=1, model=model)
    succ, fail = episode_stats(env, lambda e: torch.zeros(64, 2), 100)
    assert succ == 0 and fail >= 64


def test_ramming_the_car_ahead_is_a_collision():
    env = make_task("driving", num_envs=2, seed=0, n_agents=2, other_speed=(0.3, 0.3))
    env.assign_lanes(env.lane[:, :1].expand(2, 2))  # both cars in the ego's lane
    collided = torch.zeros(2, dtype=torch.bool)
    for _ in range(60):
        expert = env.expert_action()
        _, _, dones, extras = env.step(torch.stack([torch.ones(2), expert[:, 1]], dim=-1))
        assert not (extras["success"] & ~collided).any()
        collided |= extras["collision"] & dones
        if collided.all():
            break
    assert collided.all()


def test_same_seed_same_trajectory_and_surfaces_mixed():
    def run(seed):
        env = make_task("driving", num_envs=32, seed=seed, surface="mixed",
                        randomization={"friction_scale": (0.9, 1.1)})
        out = [env.get_observations()["policy"]]
        for _ in range(30):
            out.append(env.step(env.expert_action())[0]["policy"])
        return torch.stack(out), env.mu

    (a, mu), (b, _), (c, _) = run(5), run(5), run(6)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert sorted(set(mu.tolist())) == pytest.approx([0.15, 0.6, 1.0])


def test_expert_chunk_leaves_state_and_latency_matters():
    env = make_task("driving", num_envs=8, seed=2)
    before = env.state.as_tensor().clone()
    chunk = env.expert_chunk(6, torch.tensor([0, 3]))
    assert chunk.shape == (2, 6, 2) and torch.equal(env.state.as_tensor(), before)
    assert torch.equal(chunk[:, 0], env.expert_action()[[0, 3]])

    def planner_success(delay):
        lat = LatencyModel(planner_delay_steps=delay, planner_period_steps=4)
        task = make_task("driving", num_envs=16, seed=3, surface="wet", goal_distance=40.0)
        wrapped = make_latency_env(task, LatencyCfg(method="planner", latency=lat))
        return episode_stats(wrapped, lambda e: torch.zeros(16, 2), 70)

    fast, slow = planner_success(0), planner_success(10)
    assert fast[1] == 0 and slow[1] > fast[1]


def test_expert_chunk_plans_from_the_committed_prefix():
    env = make_task("driving", num_envs=4, seed=2)
    ids = torch.tensor([1, 2])
    before = env.state.as_tensor().clone()
    free = env.expert_chunk(8, ids)
    assert torch.equal(env.expert_chunk(8, ids, prefix=torch.full((2, 3, 2), float("nan"))),
                       free)
    prefix = torch.tensor([[[0.0, 0.3]] * 3, [[0.0, 0.3]] * 3])
    prefix[1, 2] = float("nan")  # env 2 commits two rows only
    chunk = env.expert_chunk(8, ids, prefix=prefix)
    assert torch.equal(chunk[0, :3], prefix[0]) and torch.equal(chunk[1, :2], prefix[1, :2])
    assert not torch.equal(chunk[:, 3:], free[:, 3:])
    assert torch.equal(env.state.as_tensor(), before)


def test_bad_input():
    env = make_task("driving", num_envs=3)
    with pytest.raises(ValueError, match="lanes must be in"):
        env.assign_lanes(torch.full((3, 4), 7))
    with pytest.raises(ActionError, match="shape"):
        env.step(torch.zeros(3, 1))
    with pytest.raises(ValueError, match="surface"):
        make_task("driving", num_envs=1, surface="gravel")
    with pytest.raises(ValueError, match="model"):
        make_task("driving", num_envs=1, model="quantum")
