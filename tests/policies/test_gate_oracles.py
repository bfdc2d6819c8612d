"""The privileged gate rules used to measure a scenario's oracle margin."""

from __future__ import annotations

from dataclasses import asdict

import pytest
import torch

from edgerl.policies.gate import ROADS, GateRunCfg, make_gate_env, road_gate_cfg
from edgerl.policies.gate_oracles import curvature_rule, kick_rule, road_task
from edgerl.sim.wrappers.gate import GateCfg, GatedEnv
from tests.helpers.gate_env import BUDGETS, StampTask


def test_kick_rule_replans_right_after_a_kick_and_otherwise_by_age():
    env = GatedEnv(StampTask(1, 1000), GateCfg(budgets=BUDGETS))
    policy = kick_rule(budget=2, max_age=6, react_steps=4)
    obs = env.get_observations()
    assert policy(env, obs).tolist() == [2]  # no plan yet
    env.step(torch.tensor([2]))  # slow: observed at t=0, arrives at t=3, 12 rows
    assert policy(env, obs).tolist() == [0]  # in flight: nothing more is asked
    for _ in range(4):
        env.step(torch.tensor([0]))
    assert bool(env.has_plan().all())
    assert policy(env, obs).tolist() == [0]  # plan 5 steps old, no kick: keep
    env.kick_age[:] = 1  # a kick started one step ago, after the plan was made
    assert policy(env, obs).tolist() == [2]
    env.kick_age[:] = 5  # older than react_steps: back to the age rule
    assert policy(env, obs).tolist() == [0]
    for _ in range(2):
        env.step(torch.tensor([0]))
    env.kick_age[:] = 1 << 30
    assert policy(env, obs).tolist() == [2]  # 7 steps old > max_age


def test_curvature_rule_picks_the_sharp_budget_before_a_chicane():
    gcfg = road_gate_cfg("chicanes", 0)
    cfg = GateRunCfg(task_kwargs=dict(ROADS["chicanes"], max_episode_steps=60), num_envs=2,
                     gate=asdict(gcfg))
    env = make_gate_env(cfg, 2, 0)
    task = road_task(env)
    # car 0 on the straight at the road's start, car 1 just before the first apex (37.5 m)
    task.state.x[0, 0], task.state.x[1, 0] = 0.0, 30.0
    policy = curvature_rule(look_m=10.0, threshold=0.02, sharp=(1, 4), calm=(2, 40))
    assert policy(env, env.get_observations()).tolist() == [2, 1]  # no plan: ask now
    with pytest.raises(TypeError, match="has no road"):
        road_task(GatedEnv(StampTask(1), GateCfg(budgets=BUDGETS)))
