"""Language-conditioned pushing (MuJoCo, contact): expert, instructions, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgerl.sim.registry import get_task_info, make_task
from edgerl.sim.tasks.arm_push import ArmPushCfg, ArmPushEnv
from edgerl.sim.tasks.arm_push_language import (
    COLORS,
    DIRECTIONS,
    INSTRUCTIONS,
    PARAPHRASES,
    instruction_parts,
    paraphrase_split,
)
from edgerl.sim.vec_env import ActionError
from tests.helpers.sim_checks import (
    assert_instruction_only_in_critic,
    assert_seed_decides,
    step_tensors,
)


def _env(num_envs: int = 8, seed: int = 0, **cfg) -> ArmPushEnv:
    return ArmPushEnv(num_envs=num_envs, seed=seed, cfg=ArmPushCfg(**cfg))


def _first_episodes(env: ArmPushEnv) -> np.ndarray:
    """Run the expert; success (N,) of each env's first episode."""
    ended = np.zeros(env.num_envs, dtype=bool)
    success = np.zeros(env.num_envs, dtype=bool)
    for _ in range(env.spec.max_episode_steps):
        _, _, dones, extras = env.step(env.expert_action())
        success |= dones.numpy() & ~ended & extras["success"].numpy()
        ended |= dones.numpy()
    assert ended.all()
    return success


class TestExpert:
    def test_expert_succeeds_on_most_episodes(self):
        success = _first_episodes(_env(32, seed=1))
        assert success.mean() >= 0.9

    def test_instruction_sets_which_puck_moves_and_where(self):
        # never finished (tiny tolerance): the expert keeps pushing, and we see where to
        env = _env(12, seed=2, success_tol=1e-6, max_episode_steps=200)
        env.set_instruction(np.arange(12), np.arange(12))
        start = env.pucks().copy()
        for _ in range(150):
            env.step(env.expert_action())
        moved = env.pucks() - start
        for i in range(12):
            colour, direction = instruction_parts(i)
            along = moved[i, colour] @ np.array(DIRECTIONS[direction])
            assert along > 0.06, (i, INSTRUCTIONS[i], moved[i])
            others = [k for k in range(3) if k != colour]
            assert np.all(np.linalg.norm(moved[i, others], axis=-1) < 0.01)

    def test_expert_chunk_restores_state(self):
        env = _env(4, seed=3)
        for _ in range(5):
            env.step(env.expert_action())
        state = env.sim.state.copy()
        chunk = env.expert_chunk(8)
        assert chunk.shape == (4, 8, 3)
        np.testing.assert_array_equal(env.sim.state, state)
        torch.testing.assert_close(chunk[:, 0], env.expert_action())


class TestLanguage:
    def test_instructions_and_paraphrases(self):
        assert len(INSTRUCTIONS) == len(COLORS) * len(DIRECTIONS) == 12
        assert INSTRUCTIONS[2] == "push the red block forward"
        assert INSTRUCTIONS[4] == "push the green block to the left"
        for inst in INSTRUCTIONS:
            para = PARAPHRASES[inst]
            assert len(para) >= 6 and len(set(para)) == len(para) and inst not in para
        assert len({p for ps in PARAPHRASES.values() for p in ps}) == 12 * 10
        train, held = paraphrase_split(3)
        assert all(not set(train[i]) & set(held[i]) for i in INSTRUCTIONS)
        with pytest.raises(ValueError, match="instruction id"):
            instruction_parts(12)

    def test_observation_excludes_instruction_and_goal(self):
        env = _env(4)
        assert_instruction_only_in_critic(env, (env.instruction_id + 5) % 12)
        assert env.instruction(0) == INSTRUCTIONS[int(env.instruction_id[0])]


class TestEnvContract:
    def test_make_task_and_shapes(self):
        env = make_task("arm_push", num_envs=2, seed=0)
        info = get_task_info("arm_push")
        obs = env.get_observations()
        assert obs["policy"].shape == (2, info.obs_dim) and obs["critic"].shape == (2, 29)
        assert env.num_actions == info.action_dim == 3

    def test_same_seed_gives_bitwise_identical_trajectories(self):
        def rollout(seed: int) -> list[torch.Tensor]:
            env = _env(4, seed=seed, max_episode_steps=25,
                       randomization={"friction_scale": (0.5, 1.5), "mass_scale": (0.8, 1.2)})
            return step_tensors(env, 60, env.expert_action)

        assert_seed_decides(rollout, 3, 4)

    def test_bad_input(self):
        env = _env(2)
        with pytest.raises(ActionError, match="not finite"):
            env.step(torch.tensor([[0.0, 0.0, float("nan")], [0.0, 0.0, 0.0]]))
        with pytest.raises(ValueError, match="no room"):
            ArmPushCfg(puck_radius=(0.1, 0.4))
