"""Time to a success rate: today's configuration against a tuned one in the same run."""

from __future__ import annotations

import pytest

from edgerl.bench.train.solve_time import compare_solve, time_to_success
from edgerl.policies.config import TrainConfig
from edgerl.policies.task_defaults import TaskDefaults

TINY_REF = TaskDefaults(num_envs=8, num_steps_per_env=8, num_mini_batches=2,
                        num_learning_epochs=1)
TINY_TUNED = TaskDefaults(num_envs=16, num_steps_per_env=4, learning_rate=3e-3,
                          num_mini_batches=1, num_learning_epochs=1)


def test_unreachable_target_is_not_solved():
    cfg = TrainConfig(task="cartpole", method="nodelay", num_envs=4, num_steps_per_env=4,
                      iterations=1)
    out = time_to_success(cfg, target=1.5)
    assert out == {**out, "solved": False, "time_s": None, "cpu_s": None, "env_steps": None}
    assert out["iterations"] == 1 and out["wall_s"] > 0


def test_speedup_is_the_ratio_of_median_times():
    # target 0: "solved" at the first iteration with a known success rate (no early stop)
    out = compare_solve("cartpole", seeds=[0], iterations=30, target=0.0,
                        tuned=TINY_TUNED, reference=TINY_REF)
    ref, tuned = out["runs"]["reference"][0], out["runs"]["tuned"][0]
    assert ref["solved"] and tuned["solved"]
    assert out["reference_time_s"] == ref["time_s"] and out["tuned_time_s"] == tuned["time_s"]
    assert out["speedup"] == pytest.approx(ref["time_s"] / tuned["time_s"], rel=1e-2)
    assert out["cpu_speedup"] == pytest.approx(ref["cpu_s"] / tuned["cpu_s"], rel=1e-2)
    assert out["reference_cfg"]["num_envs"] == 8 and out["tuned_cfg"]["num_envs"] == 16
    # both get the same env-step budget: 30 reference iterations of 64 steps
    assert tuned["env_steps"] <= 30 * 64 and ref["env_steps"] <= 30 * 64


def test_candidate_config_reads_task_defaults_ppo_and_actor_fields():
    from edgerl.bench.train.solve_time import candidate_config

    cfg = candidate_config("ball_balance", 3, {"num_envs": 32, "hidden_dims": [16, 16],
                                               "gamma": 0.9, "ppo": {"entropy_coef": 0.0},
                                               "actor": {"init_std": 0.5}}, budget=1000)
    assert (cfg.task, cfg.method, cfg.seed, cfg.num_envs) == ("ball_balance", "nodelay", 3, 32)
    assert cfg.iterations == 1  # 1000 env steps: one iteration of 32 x 32 (rounded up)
    assert cfg.actor.hidden_dims == [16, 16] and cfg.critic.hidden_dims == [16, 16]
    assert (cfg.ppo.gamma, cfg.ppo.entropy_coef, cfg.actor.init_std) == (0.9, 0.0, 0.5)
    assert cfg.ppo.num_learning_epochs == 5  # BASELINE's where the candidate says nothing
    base = candidate_config("cartpole", 0, {}, budget=64 * 32 * 7)
    assert base.iterations == 7 and base.actor.hidden_dims == [128, 128]
    with pytest.raises(TypeError, match="bogus"):
        candidate_config("cartpole", 0, {"bogus": 1}, budget=10)
