"""The torch cart-pole smoke task: expert, success/time-out flags, determinism, bad input."""

from __future__ import annotations

import pytest
import torch

from edgerl.sim import make_task
from edgerl.sim.registry import get_task_info
from edgerl.sim.tasks.cartpole import CartpoleCfg, cartpole_dynamics
from edgerl.sim.vec_env import ActionError, EdgeVecEnv


def rollout(env, policy, steps):
    succ = fail = 0
    for _ in range(steps):
        _, _, dones, extras = env.step(policy(env))
        succ += int(extras["success"].sum())
        fail += int((dones & ~extras["time_outs"]).sum())
    return succ, fail


def test_registered_and_sizes():
    info = get_task_info("cartpole")
    env = make_task("cartpole", num_envs=8)
    assert isinstance(env, EdgeVecEnv)
    assert (info.backend, info.obs_dim, info.action_dim) == ("torch", 4, 1)
    assert env.get_observations()["policy"].shape == (8, 4)
    assert env.spec.obs_dim == 4 and env.spec.control_hz == info.control_hz


def test_expert_succeeds_and_doing_nothing_fails():
    steps = CartpoleCfg().max_episode_steps
    env = make_task("cartpole", num_envs=256, seed=1)
    succ, fail = rollout(env, lambda e: e.expert_action(), steps)
    assert (succ, fail) == (256, 0)
    env = make_task("cartpole", num_envs=256, seed=1)
    succ, fail = rollout(env, lambda e: torch.zeros(256, 1), steps)
    assert succ == 0 and fail >= 256


def test_time_out_is_success_and_resets():
    env = make_task("cartpole", num_envs=4, seed=0, max_episode_steps=5)
    for _ in range(4):
        _, _, dones, extras = env.step(env.expert_action())
        assert not dones.any()
    _, _, dones, extras = env.step(env.expert_action())
    assert dones.all() and extras["time_outs"].all() and extras["success"].all()
    assert (env.episode_length_buf == 0).all()


def test_same_seed_bitwise_identical_trajectories():
    def traj(seed):
        env = make_task("cartpole", num_envs=16, seed=seed,
                        randomization={"mass_scale": (0.5, 1.5), "actuator_gain": (0.8, 1.2)})
        gen = torch.Generator().manual_seed(5)
        out = []
        for _ in range(120):  # crosses resets
            obs, rew, dones, _ = env.step(torch.rand(16, 1, generator=gen) * 2 - 1)
            out.append(torch.cat([obs["policy"], rew[:, None], dones[:, None].float()], -1))
        return torch.stack(out)

    a, b, c = traj(3), traj(3), traj(4)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_expert_chunk_is_a_rollout_without_side_effects():
    env = make_task("cartpole", num_envs=6, seed=2)
    state = env.state.clone()
    ids = torch.tensor([1, 4])
    chunk = env.expert_chunk(10, ids)
    assert chunk.shape == (2, 10, 1)
    assert torch.equal(env.state, state)
    assert torch.equal(chunk[:, 0], env.expert_action()[ids])
    # Row 1 is the expert's action after one step of the real dynamics under row 0.
    env.step(torch.where(torch.isin(torch.arange(6), ids)[:, None],
                         env.expert_chunk(1).reshape(6, 1), torch.zeros(6, 1)))
    assert torch.allclose(env.expert_action()[ids], chunk[:, 1], atol=1e-6)


def test_randomization_changes_dynamics_per_env():
    env = make_task("cartpole", num_envs=64, seed=0,
                    randomization={"mass_scale": (0.5, 2.0), "latency_steps": (0, 3)})
    r = env.randomizer
    assert r.mass_scale.min() >= 0.5 and r.mass_scale.max() <= 2.0
    assert r.mass_scale.std() > 0.1
    assert set(r.latency_steps.unique().tolist()) <= {0, 1, 2, 3}
    assert len(r.latency_steps.unique()) > 1
    cfg = CartpoleCfg()
    s = torch.zeros(2, 4)
    s[:, 2] = 0.1
    heavy = cartpole_dynamics(s, torch.ones(2), cfg, mass_scale=torch.tensor([1.0, 2.0]))
    assert heavy[0, 1] > heavy[1, 1]  # the same force accelerates the heavier cart less


def test_bad_actions_raise_without_changing_state():
    env = make_task("cartpole", num_envs=4)
    state = env.state.clone()
    with pytest.raises(ActionError, match="shape"):
        env.step(torch.zeros(4))
    with pytest.raises(ActionError, match="not finite"):
        env.step(torch.tensor([[0.0], [float("inf")], [0.0], [0.0]]))
    assert torch.equal(env.state, state) and (env.episode_length_buf == 0).all()


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="randomization.mass_scale"):
        make_task("cartpole", num_envs=2, randomization={"mass_scale": (2.0, 1.0)})
    with pytest.raises(ValueError, match="num_envs"):
        make_task("cartpole", num_envs=0)


class TestCartpoleGoal:
    """``cartpole_goal``: a goal cart position that only the planner sees."""

    def test_goal_is_a_planner_only_observation(self):
        env = make_task("cartpole_goal", num_envs=64, seed=0)
        info = get_task_info("cartpole_goal")
        obs = env.get_observations()["policy"]
        assert obs.shape == (64, 5) == (64, info.obs_dim)
        assert env.spec.obs_names[-1] == "goal_x" and env.spec.planner_only == ["goal_x"]
        assert env.spec.fast_obs_indices == [0, 1, 2, 3]
        goal = obs[:, 4]
        assert torch.equal(goal, env.goal)
        assert goal.abs().max() <= 1.0 and goal.std() > 0.3  # drawn in [-1, 1] per episode

    def test_expert_reaches_the_goal_but_balancing_alone_does_not(self):
        steps = 150  # cartpole_goal episodes
        env = make_task("cartpole_goal", num_envs=256, seed=1)
        succ, fail = rollout(env, lambda e: e.expert_action(), steps)
        assert succ >= 250 and fail == 0
        # the classic balancing LQR (goal 0) stays up but ends far from most goals
        env = make_task("cartpole_goal", num_envs=256, seed=1)
        balance = env._lqr

        def lqr_to_zero(e):
            return (-(e.state @ balance)).clamp(-1.0, 1.0)[:, None]

        succ, fail = rollout(env, lqr_to_zero, steps)
        assert fail == 0 and succ < 0.4 * 256

    def test_success_needs_the_goal_at_the_end(self):
        env = make_task("cartpole_goal", num_envs=2, seed=0, max_episode_steps=1, goal_tol=0.2)
        env.state[:] = 0.0
        env.goal[:] = torch.tensor([0.0, 0.5])
        _, _, dones, extras = env.step(torch.zeros(2, 1))
        assert dones.tolist() == [True, True]
        assert extras["success"].tolist() == [True, False]

    def test_bad_goal_config_is_rejected(self):
        with pytest.raises(ValueError, match="goal_range"):
            make_task("cartpole_goal", num_envs=1, goal_range=3.0)
