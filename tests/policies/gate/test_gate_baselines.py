"""Gate baselines (fixed, chunk-age heuristic, random) and the episode evaluation."""

from __future__ import annotations

import pytest

from edgerl.policies.gate.baselines import (
    age_heuristic,
    evaluate_gate,
    fixed_policy,
    keep_index,
    random_policy,
)
from edgerl.sim.gate.budgets import KEEP, PlanBudget
from edgerl.sim.gate.env import GateCfg, GatedEnv
from tests.helpers.gate_env import BUDGETS, StampTask


def make(num_envs=2, length=10):
    return GatedEnv(StampTask(num_envs, length), GateCfg(budgets=BUDGETS))


def test_age_heuristic_replans_only_when_old_and_idle():
    env = make(1)
    pol = age_heuristic(2, 4)  # slow: D = 3, 12 rows
    choices = []
    obs = env.get_observations()
    for _ in range(12):
        c = pol(env, obs)
        choices.append(int(c[0]))
        obs, *_ = env.step(c)
    # ask at 0 (no plan); in flight 1-2; adopted at 3 (age 3, 4); age 5 > 4 at t=5: ask again
    assert choices == [2, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2, 0]


def test_fixed_random_and_keep_index():
    env = make(3)
    assert fixed_policy(1)(env, None).tolist() == [1, 1, 1]
    r = random_policy(0)(env, None)
    assert r.shape == (3,) and bool(((r >= 0) & (r < 3)).all())
    assert keep_index(env) == 0
    no_keep = GatedEnv(StampTask(1), GateCfg(budgets=(PlanBudget("a", horizon=2),)))
    with pytest.raises(ValueError, match="no 'keep'"):
        keep_index(no_keep)


def test_evaluate_counts_each_envs_first_episodes():
    out = evaluate_gate(lambda: make(2, length=5), fixed_policy(1), episodes=3)
    assert out["episodes"] == 4  # ceil(3 / 2) episodes per env
    assert out["length_mean"] == 5.0 and out["success_rate"] == 0.0
    assert out["return_mean"] == pytest.approx(-0.5 * 5)  # the fast budget's cost each step
    assert out["share_fast"] == 1.0 and out["share_keep"] == 0.0
    assert KEEP.name == "keep"
