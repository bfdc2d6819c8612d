"""gymnasium's env checker on the single-env view of every registered task."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from edgerl.sim.gym_view import GymView
from edgerl.sim.registry import list_tasks
from edgerl.sim.vec_env import ActionError

# Our observation spaces are unbounded and some MuJoCo action ranges are not [-1, 1].
pytestmark = pytest.mark.filterwarnings("ignore:.*Box.*space:UserWarning")


@pytest.mark.parametrize("name", [info.name for info in list_tasks()])
def test_check_env_passes(name):
    view = GymView(name)
    try:
        check_env(view, skip_render_check=True)
        info = next(i for i in list_tasks() if i.name == name)
        obs, _ = view.reset(seed=7)
        assert obs.shape == (info.obs_dim,) and view.action_space.shape == (info.action_dim,)
        again, _ = view.reset(seed=7)
        assert np.array_equal(obs, again)
    finally:
        view.close()


def test_episode_end_flags_and_bad_action():
    view = GymView("cartpole", max_episode_steps=3)
    view.reset(seed=0)
    flags = [view.step(np.zeros(1, np.float32))[2:4] for _ in range(3)]
    assert flags[:2] == [(False, False), (False, False)]
    assert flags[2] in ((False, True), (True, False))
    with pytest.raises(ActionError, match="not finite"):
        view.step(np.array([np.nan], np.float32))
    with pytest.raises(ValueError, match="1-env"):
        from edgerl.sim import make_task
        GymView(make_task("cartpole", num_envs=2))
