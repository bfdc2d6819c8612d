"""``edgerl.bench.sim.overhead``: a MuJoCo task's step rate as a ratio to its raw backend."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgerl.bench.sim.overhead import StateReplay, overhead_ratio
from edgerl.sim.mujoco.backends import MujocoBatch, load_model
from edgerl.sim.registry import make_task


def test_ratio_is_best_over_best():
    out = overhead_ratio("arm_reach", num_envs=4, steps=3, blocks=2, warmup=1)
    assert out["steps_per_s"] > 0 and out["raw_physics_steps_per_s"] > 0
    assert out["ratio"] == pytest.approx(out["steps_per_s"] / out["raw_physics_steps_per_s"],
                                         rel=1e-2)
    assert out["ratio_from_rest"] == pytest.approx(
        out["steps_per_s"] / out["raw_from_rest_steps_per_s"], rel=1e-2)
    assert out["median_pair_ratio"] > 0
    assert (out["num_envs"], out["steps"], out["blocks"]) == (4, 3, 2)


def test_torch_task_is_a_named_error():
    with pytest.raises(ValueError, match="not a MuJoCo task"):
        overhead_ratio("cartpole", num_envs=2, steps=1, blocks=1)


def test_bad_sizes():
    with pytest.raises(ValueError, match=">= 1"):
        overhead_ratio("arm_reach", blocks=0)


class TestStateReplay:
    def _batch(self) -> MujocoBatch:
        batch = MujocoBatch(load_model("arm_planar.xml"), 3, nthread=1)
        batch.qpos[:] = [[0.1, 0.2], [-0.5, 1.0], [2.0, -1.0]]
        return batch

    def test_records_the_state_before_each_step_and_replays_it(self):
        batch = self._batch()
        replay = StateReplay(batch, capacity=4)
        after = []
        with replay.recording():
            for k in range(3):
                batch.ctrl[:] = k + 1.0
                batch.step(1)
                after.append(batch.state.copy())
        assert "step" not in vars(batch)  # the method is back
        assert replay.count == 3
        # time and qpos lead each row: the second record starts where the first step ended
        np.testing.assert_array_equal(replay.rows[1][:, :3], after[0][:, :3])
        final = batch.state.copy()
        assert replay.replay(1) > 0
        np.testing.assert_array_equal(batch.state, final)  # restored bitwise
        # each recorded row set is what the step started from: stepping it again gives the
        # state the task had after that step
        for k in range(3):
            np.copyto(batch.state, replay.rows[k])
            batch.step(1)
            np.testing.assert_array_equal(batch.state, after[k])

    def test_task_states_are_recorded_through_env_step(self):
        env = make_task("ball_balance", num_envs=4, seed=0)
        replay = StateReplay(env.sim, capacity=2)
        with replay.recording():
            env.step(torch.zeros(4, env.num_actions))
            env.step(torch.zeros(4, env.num_actions))
        assert replay.count == 2 and not np.array_equal(replay.rows[0], replay.rows[1])
        env.close()

    def test_misuse_is_named(self):
        batch = self._batch()
        replay = StateReplay(batch, capacity=1)
        with pytest.raises(RuntimeError, match="nothing recorded"):
            replay.replay(1)
        with pytest.raises(RuntimeError, match="more than 1 steps"), replay.recording():
            batch.step(1)
            batch.step(1)
        with pytest.raises(RuntimeError, match="whole-batch"), replay.recording():
            batch.step(1, np.array([0]))
        assert "step" not in vars(batch)
