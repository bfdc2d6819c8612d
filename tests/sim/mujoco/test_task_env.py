"""The MuJoCo task base: control substeps, episode counters, actions validated before stepping."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgerl.sim import make_task
from edgerl.sim.mujoco.backends import load_model
from edgerl.sim.mujoco.task_env import control_substeps
from edgerl.sim.vec_env import ActionError


def test_control_substeps_divide_the_physics_rate():
    model = load_model("arm_planar.xml")
    physics_hz = 1.0 / model.opt.timestep
    assert control_substeps("arm_reach", physics_hz / 4, model) == 4
    with pytest.raises(ValueError, match="arm_reach: control_hz 3"):
        control_substeps("arm_reach", 3.0, model)


def test_episode_length_buf_is_a_copy_that_can_be_assigned():
    env = make_task("ball_balance", num_envs=3, seed=0)
    try:
        env.step(torch.zeros(3, env.num_actions))
        buf = env.episode_length_buf
        assert buf.tolist() == [1, 1, 1]
        buf += 5  # a copy: the env is unchanged
        assert env.episode_length_buf.tolist() == [1, 1, 1]
        env.episode_length_buf = torch.tensor([4, 0, 2])
        assert env.episode_length_buf.tolist() == [4, 0, 2]
    finally:
        env.close()


def test_bad_actions_leave_the_state_untouched():
    env = make_task("ball_balance", num_envs=2, seed=0)
    try:
        before = env.sim.state.copy()
        bad = torch.zeros(2, env.num_actions)
        bad[1, 0] = float("nan")
        with pytest.raises(ActionError, match=r"\[1, 0\]"):
            env.step(bad)
        with pytest.raises(ActionError):
            env.step(torch.zeros(3, env.num_actions))
        np.testing.assert_array_equal(env.sim.state, before)
    finally:
        env.close()
