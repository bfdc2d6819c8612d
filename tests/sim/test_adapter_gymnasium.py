"""The gymnasium adapter: spec from spaces, done/time-out mapping, auto-reset conversion."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from edgerl.sim.adapters.gymnasium import GymAdapterError, GymVecEnv
from edgerl.sim.registry import get_task_info, make_task


class TestSpecFromSpaces:
    def test_pendulum_layout_limits_rate(self):
        env = GymVecEnv("Pendulum-v1", num_envs=2)
        try:
            s = env.spec
            assert s.name == "gym:Pendulum-v1"
            assert s.obs_names == ["obs0", "obs1", "obs2"] and s.action_names == ["act0"]
            assert (s.action_low, s.action_high) == ([-2.0], [2.0])
            assert s.control_hz == pytest.approx(20.0)  # Pendulum dt = 0.05 s
            assert s.max_episode_steps == 200
            obs = env.get_observations()["policy"]
            assert obs.shape == (2, 3) and obs.dtype == torch.float32
        finally:
            env.close()

    def test_registry_family(self):
        info = get_task_info("gym:InvertedPendulum-v5")
        assert (info.backend, info.obs_dim, info.action_dim) == ("gymnasium", 4, 1)
        assert info.control_hz == pytest.approx(25.0)  # 2 frames x 0.02 s
        env = make_task("gym:InvertedPendulum-v5", num_envs=3, seed=0)
        try:
            assert env.num_envs == 3 and env.spec.action_high == [3.0]
        finally:
            env.close()

    def test_planner_only_by_index_or_name(self):
        env = make_task("gym:Pendulum-v1", num_envs=1, planner_only=[2, "obs0"])
        try:
            assert env.spec.planner_only == ["obs2", "obs0"]
            assert env.spec.fast_obs_indices == [1]
        finally:
            env.close()
        with pytest.raises(GymAdapterError, match="planner_only index 3 is outside"):
            GymVecEnv("Pendulum-v1", planner_only=[3])
        with pytest.raises(GymAdapterError, match="'goal' is neither"):
            GymVecEnv("Pendulum-v1", planner_only=["goal"])
        with pytest.raises(ValueError, match="leaves the fast policy no observation"):
            GymVecEnv("Pendulum-v1", planner_only=[0, 1, 2])

    def test_unknown_env_id_names_it(self):
        with pytest.raises(KeyError, match="NoSuchEnv-v0"):
            get_task_info("gym:NoSuchEnv-v0")

    def test_discrete_actions_refused(self):
        with pytest.raises(GymAdapterError, match="not continuous"):
            GymVecEnv("CartPole-v1")

    @pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
    def test_cuda_absent_is_a_clear_error(self):
        with pytest.raises(GymAdapterError, match="CUDA is not available"):
            GymVecEnv("Pendulum-v1", device="cuda")

    def test_no_expert_says_how_to_get_one(self):
        env = GymVecEnv("Pendulum-v1")
        try:
            with pytest.raises(NotImplementedError, match="nodelay"):
                env.expert_action()
        finally:
            env.close()


class TestDonesAndTimeOuts:
    def test_truncation_is_a_time_out_and_resets_same_step(self):
        env = GymVecEnv("Pendulum-v1", num_envs=2, seed=3, env_kwargs={"max_episode_steps": 4})
        try:
            for k in range(4):
                obs, rew, dones, extras = env.step(torch.zeros(2, 1))
                assert rew.shape == (2,) and rew.dtype == torch.float32
                if k < 3:
                    assert dones.tolist() == [0, 0]
                    assert env.episode_length_buf.tolist() == [k + 1, k + 1]
            assert dones.tolist() == [1, 1]
            assert extras["time_outs"].tolist() == [True, True]
            assert extras["success"].tolist() == [False, False]
            assert env.episode_length_buf.tolist() == [0, 0]
            # the returned obs is the new episode's first one: |theta_dot| <= 1 at reset
            assert obs["policy"][:, 2].abs().max() <= 1.0
            assert not torch.equal(obs["policy"], env.final_obs)
        finally:
            env.close()

    def test_termination_is_not_a_time_out(self):
        env = GymVecEnv("InvertedPendulum-v5", num_envs=2, seed=0)
        try:
            ended = None
            for _ in range(20):  # full push: the pole falls past 0.2 rad within a few steps
                _, _, dones, extras = env.step(torch.full((2, 1), 3.0))
                if bool(dones.any()):
                    ended = extras
                    break
            assert ended is not None
            assert ended["time_outs"].tolist() == [False, False]
            assert env.final_obs[:, 1].abs().min() > 0.2  # terminal angle beyond the limit
            assert env.get_observations()["policy"][:, 1].abs().max() < 0.02  # fresh episode
        finally:
            env.close()

    def test_actions_clipped_and_validated(self):
        env = GymVecEnv("Pendulum-v1", num_envs=1, seed=0)
        ref = GymVecEnv("Pendulum-v1", num_envs=1, seed=0)
        try:
            a, _, _, _ = env.step(torch.tensor([[50.0]]))
            b, _, _, _ = ref.step(torch.tensor([[2.0]]))
            assert torch.equal(a["policy"], b["policy"])
            with pytest.raises(ValueError, match="shape"):
                env.step(torch.zeros(2, 1))
        finally:
            env.close()
            ref.close()


def _rollout(env: GymVecEnv, actions: np.ndarray) -> tuple[list, list, list]:
    obs, dones, touts = [], [], []
    for a in actions:
        o, _, d, ex = env.step(torch.as_tensor(a))
        obs.append(o["policy"].clone())
        dones.append(d.clone())
        touts.append(ex["time_outs"].clone())
    return obs, dones, touts


class TestAutoresetModes:
    """A user's NEXT_STEP vector env gives exactly the trajectory of our SAME_STEP one."""

    @pytest.mark.parametrize("vector_cls", ["sync", "async"])
    def test_next_step_matches_same_step(self, vector_cls):
        steps, n = 14, 2
        rng = np.random.default_rng(0)
        actions = rng.uniform(-2, 2, size=(steps, n, 1)).astype(np.float32)
        fns = [lambda i=i: gym.make("Pendulum-v1", max_episode_steps=3 + 2 * i) for i in range(n)]
        cls = gym.vector.SyncVectorEnv if vector_cls == "sync" else gym.vector.AsyncVectorEnv
        user_vec = cls(fns, autoreset_mode=AutoresetMode.NEXT_STEP)
        user = GymVecEnv(user_vec, seed=7)
        ours = GymVecEnv(gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP),
                         seed=7)
        try:
            assert user.autoreset_mode == AutoresetMode.NEXT_STEP
            assert torch.equal(user.get_observations()["policy"],
                               ours.get_observations()["policy"])
            u_obs, u_d, u_t = _rollout(user, actions)
            o_obs, o_d, o_t = _rollout(ours, actions)
            done_counts = torch.stack(u_d).sum(0).tolist()
            assert done_counts == [4, 2]  # episodes of 3 and 5 steps over 14 steps
            for k in range(steps):
                assert torch.equal(u_d[k], o_d[k]) and torch.equal(u_t[k], o_t[k])
                assert torch.allclose(u_obs[k], o_obs[k], atol=0, rtol=0), k
        finally:
            user.close()
            ours.close()

    def test_single_env_instance(self):
        env = GymVecEnv(gym.make("Pendulum-v1", max_episode_steps=2), seed=1)
        try:
            assert env.num_envs == 1 and env.autoreset_mode == AutoresetMode.SAME_STEP
            env.step(torch.zeros(1, 1))
            _, _, d, ex = env.step(torch.zeros(1, 1))
            assert d.tolist() == [1] and ex["time_outs"].tolist() == [True]
        finally:
            env.close()

    def test_partial_reset(self):
        env = GymVecEnv("Pendulum-v1", num_envs=3, seed=0)
        try:
            for _ in range(3):
                env.step(torch.ones(3, 1))
            before = env.get_observations()["policy"].clone()
            after = env.reset(torch.tensor([1]))["policy"]
            assert torch.equal(after[0], before[0]) and torch.equal(after[2], before[2])
            assert not torch.equal(after[1], before[1])
            assert env.episode_length_buf.tolist() == [3, 0, 3]
        finally:
            env.close()


class _Hold(gym.Env):
    """1-D env whose episode succeeds when the state stays at 0 (info ``is_success``)."""

    metadata = {"render_modes": [], "render_fps": 10}

    def __init__(self, start: float = 0.0) -> None:
        self.dt = 0.1
        self.start = start
        self.observation_space = gym.spaces.Box(-10, 10, (1,), np.float32)
        self.action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = np.array([self.start], dtype=np.float32)
        return self.x.copy(), {}

    def step(self, action):
        self.x = self.x + np.asarray(action, dtype=np.float32)
        return self.x.copy(), 0.0, False, False, {"is_success": bool(self.x[0] == 0.0)}


def test_is_success_info_reaches_extras():
    from gymnasium.wrappers import TimeLimit

    fns = [lambda s=s: TimeLimit(_Hold(s), max_episode_steps=2) for s in (0.0, 1.0)]
    env = GymVecEnv(gym.vector.SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP))
    try:
        assert env.spec.control_hz == pytest.approx(10.0)
        _, _, d, ex = env.step(torch.zeros(2, 1))
        assert d.tolist() == [0, 0] and ex["success"].tolist() == [False, False]
        _, _, d, ex = env.step(torch.zeros(2, 1))
        assert d.tolist() == [1, 1] and ex["success"].tolist() == [True, False]
        assert env.final_obs[:, 0].tolist() == [0.0, 1.0]
    finally:
        env.close()
