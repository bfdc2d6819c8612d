"""Language-conditioned planar arm (MuJoCo): expert, instructions, determinism, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgerl.sim.registry import get_task_info, make_task
from edgerl.sim.tasks.arm import ArmReachCfg, ArmReachEnv, arm_fk, arm_ik
from edgerl.sim.tasks.arm_language import COLORS, INSTRUCTIONS, PARAPHRASES, paraphrase_split
from edgerl.sim.vec_env import ActionError
from tests.helpers.sim_checks import (
    assert_instruction_only_in_critic,
    assert_seed_decides,
    step_tensors,
)


def _env(num_envs: int = 8, seed: int = 0, **cfg) -> ArmReachEnv:
    return ArmReachEnv(num_envs=num_envs, seed=seed, cfg=ArmReachCfg(**cfg))


class TestKinematics:
    def test_ik_inverts_fk_on_both_elbow_branches(self):
        goal = np.array([[0.3, 0.1], [-0.2, 0.25], [0.0, -0.42]])
        for sign in (1.0, -1.0):
            q = arm_ik(goal, np.full(3, sign))
            np.testing.assert_allclose(arm_fk(q), goal, atol=1e-12)
            assert np.all(np.sign(q[:, 1]) == sign)

    def test_observed_fingertip_matches_mujoco_site(self):
        env = _env(2)
        env.step(torch.tensor([[1.0, -2.0], [0.5, 0.5]]))
        data = env.sim._batch.get_data(1)
        import mujoco

        mujoco.mj_forward(env.model, data)
        tip = env.get_observations()["policy"][1, 6:8].numpy()
        np.testing.assert_allclose(tip, data.site("fingertip").xpos[:2], atol=1e-6)
        # the targets the observation reports are the MuJoCo mocap bodies
        np.testing.assert_array_equal(data.mocap_pos[:, :2], env.targets[1])
        obs_targets = env.get_observations()["policy"][1, 8:].numpy().reshape(4, 2)
        np.testing.assert_allclose(obs_targets, env.targets[1], atol=1e-6)


class TestExpert:
    def test_expert_reaches_the_named_target(self):
        env = _env(32, seed=1)
        first_end = torch.zeros(32, dtype=torch.bool)
        first_success = torch.zeros(32, dtype=torch.bool)
        for _ in range(env.spec.max_episode_steps):
            _, _, dones, extras = env.step(env.expert_action())
            new = dones & ~first_end
            first_success |= new & extras["success"]
            first_end |= dones
        assert first_success.float().mean().item() >= 0.9

    def test_instruction_id_changes_the_goal_the_expert_reaches(self):
        # success never ends the episode here (hold_steps > episode), so the arm stays
        env = _env(8, seed=2, hold_steps=1000, max_episode_steps=200)
        ids = np.arange(8) % 4
        env.set_instruction(np.arange(8), ids)
        for _ in range(80):
            env.step(env.expert_action())
        tip = arm_fk(env.sim.qpos)
        dist = np.linalg.norm(env.targets - tip[:, None, :], axis=-1)  # (8, 4)
        assert np.all(dist[np.arange(8), ids] < env.cfg.success_tol)
        assert np.all(np.argmin(dist, axis=1) == ids)

    def test_expert_chunk_restores_state_and_starts_with_expert_action(self):
        env = _env(4, seed=3)
        env.step(env.expert_action())
        before = env.sim.state.copy()
        chunk = env.expert_chunk(6)
        assert chunk.shape == (4, 6, 2) and chunk.dtype == torch.float32
        np.testing.assert_array_equal(env.sim.state, before)
        torch.testing.assert_close(chunk[:, 0], env.expert_action())
        assert not torch.equal(chunk[:, 0], chunk[:, 5])
        sub = env.expert_chunk(6, env_ids=torch.tensor([2, 0]))
        assert torch.equal(sub, chunk[[2, 0]])
        np.testing.assert_array_equal(env.sim.state, before)


class TestLanguage:
    def test_observation_excludes_the_instruction(self):
        env = _env(4)
        assert_instruction_only_in_critic(env, (env.instruction_id + 1) % 4)

    def test_instruction_text_names_the_goal_colour(self):
        env = _env(16, seed=4)
        assert env.spec.instructions == list(INSTRUCTIONS)
        for i in range(16):
            colour = COLORS[int(env.instruction_id[i])]
            assert env.instruction(i) == f"reach the {colour} target"
            np.testing.assert_array_equal(env.goal()[i], env.targets[i, COLORS.index(colour)])
        assert set(env.instruction_ids().tolist()) <= {0, 1, 2, 3}

    def test_bad_instruction_id(self):
        with pytest.raises(ValueError, match="instruction ids"):
            _env(2).set_instruction([0], [4])

    def test_paraphrases(self):
        assert set(PARAPHRASES) == set(INSTRUCTIONS)
        for inst, colour in zip(INSTRUCTIONS, COLORS):
            para = PARAPHRASES[inst]
            assert len(para) >= 6 and len(set(para)) == len(para)
            assert all(colour in p for p in para) and inst not in para
        train, held = paraphrase_split(3)
        for inst in INSTRUCTIONS:
            assert len(held[inst]) == 3 and not set(held[inst]) & set(train[inst])
            assert train[inst][0] == inst


class TestEnvContract:
    def test_registry_info_matches_the_spec(self):
        env = make_task("arm_reach", num_envs=2, seed=0)
        info = get_task_info("arm_reach")
        assert (info.obs_dim, info.action_dim, info.control_hz) == (
            env.spec.obs_dim, env.spec.action_dim, env.spec.control_hz)
        obs = env.get_observations()
        assert obs["policy"].shape == (2, 16) and obs["critic"].shape == (2, 22)

    def test_same_seed_gives_bitwise_identical_trajectories(self):
        def rollout(seed: int) -> list[torch.Tensor]:
            env = _env(6, seed=seed, max_episode_steps=20)
            g = torch.Generator().manual_seed(7)
            return step_tensors(env, 45, lambda: (torch.rand(6, 2, generator=g) * 2 - 1) * 3)

        assert_seed_decides(rollout, 5, 6)

    def test_time_outs_and_resets(self):
        env = _env(3, max_episode_steps=4)
        for step in range(1, 5):
            _, _, dones, extras = env.step(torch.zeros(3, 2))
            assert extras["time_outs"].tolist() == [step == 4] * 3
            assert dones.tolist() == [step == 4] * 3
            assert extras["success"].dtype == torch.bool
        assert env.episode_length_buf.tolist() == [0, 0, 0]

    def test_bad_actions_raise_and_leave_state_untouched(self):
        env = _env(2)
        before = env.sim.state.copy()
        with pytest.raises(ActionError, match="not finite"):
            env.step(torch.tensor([[0.0, float("nan")], [0.0, 0.0]]))
        with pytest.raises(ActionError, match="shape"):
            env.step(torch.zeros(2, 3))
        np.testing.assert_array_equal(env.sim.state, before)

    def test_out_of_range_actions_are_clipped(self):
        env = _env(1)
        env.step(torch.tensor([[100.0, -100.0]]))
        assert env.sim.ctrl[0].tolist() == [3.0, -3.0]

    def test_bad_config(self):
        with pytest.raises(ValueError, match="workspace"):
            ArmReachCfg(target_radius=(0.1, 0.6))
        with pytest.raises(ValueError, match="divide"):
            _env(1, control_hz=30.0)

    def test_randomization_scales_model_parameters(self):
        env = _env(4, seed=0, randomization={"mass_scale": (2.0, 2.0),
                                             "actuator_gain": (0.5, 1.5)})
        np.testing.assert_allclose(env.sim.param("body_mass"), 2.0 * env.model.body_mass[None]
                                   .repeat(4, 0))
        # derived constants follow the randomized masses (mj_setConst per env)
        np.testing.assert_allclose(env.sim._batch.expanded("body_subtreemass")[:, 1],
                                   2.0 * env.model.body_subtreemass[1])
        gain = env.sim.param("actuator_gainprm")[:, :, 0] / env.model.actuator_gainprm[:, 0]
        np.testing.assert_allclose(gain[:, 0], env.randomizer.actuator_gain.numpy(), rtol=1e-6)
        assert gain[:, 0].std() > 0.01

    def test_throughput_hooks(self):
        env = _env(16)
        assert env.raw_physics_steps_per_s(16, 5) > 100.0


class TestCachedGoal:
    """The reward and the critic read the goal cached per episode; every way the goal
    changes (reset, set_instruction) must refresh it."""

    def test_reward_and_critic_follow_set_instruction(self):
        env = _env(4, seed=5, hold_steps=1000)
        for target in range(4):
            env.set_instruction(np.arange(4), np.full(4, target))
            obs, reward, _, _ = env.step(torch.zeros(4, 2))
            tip = arm_fk(env.sim.qpos)
            dist = np.linalg.norm(tip - env.targets[:, target], axis=-1)
            np.testing.assert_allclose(reward.numpy(), -dist, atol=1e-5)
            critic = obs["critic"].numpy()
            np.testing.assert_allclose(critic[:, 16:18], env.targets[:, target], atol=1e-6)
            np.testing.assert_array_equal(critic[:, 18:], np.eye(4)[np.full(4, target)])

    def test_auto_reset_refreshes_the_goal(self):
        env = _env(2, seed=6, max_episode_steps=2, hold_steps=1000)
        before = env.goal().copy()
        for _ in range(2):
            env.step(torch.zeros(2, 2))  # the second step times out and resets
        assert not np.allclose(env.goal(), before)
        obs, reward, _, _ = env.step(torch.zeros(2, 2))
        dist = np.linalg.norm(arm_fk(env.sim.qpos) - env.goal(), axis=-1)
        np.testing.assert_allclose(reward.numpy(), -dist, atol=1e-5)
        np.testing.assert_allclose(obs["critic"].numpy()[:, 16:18], env.goal(), atol=1e-6)
