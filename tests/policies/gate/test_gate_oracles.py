"""The privileged gate rules used to measure a scenario's oracle margin."""

from __future__ import annotations

from dataclasses import asdict

import pytest
import torch

from edgerl.policies.gate.oracles import curvature_rule, kick_rule, road_task
from edgerl.policies.gate.policy import ROADS, GateRunCfg, make_gate_env, road_gate_cfg
from edgerl.sim.gate.env import GateCfg, GatedEnv
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


def test_kick_rule_with_a_kick_budget_waits_runs_out_and_overrides_a_plan_in_flight():
    env = GatedEnv(StampTask(1, 1000), GateCfg(budgets=BUDGETS))
    # by age: slow (delay 3, 12 rows); after a kick: fast, once the kick is 2 steps old
    policy = kick_rule(budget=2, max_age=20, react_steps=4, kick_budget=1, wait=2)
    obs = env.get_observations()
    env.step(torch.tensor([2]))  # slow observed at t=0, arrives at t=3
    for _ in range(4):
        env.step(torch.tensor([0]))  # t=5: the slow plan runs, 7 rows left
    assert policy(env, obs).tolist() == [0]
    env.kick_age[:] = 1  # the kick is not 2 steps old yet
    assert policy(env, obs).tolist() == [0]
    env.kick_age[:] = 2  # now it is, and the plan (observed at t=0) predates it: fast
    assert policy(env, obs).tolist() == [1]
    env.kick_age[:] = 1 << 30
    for _ in range(3):
        env.step(torch.tensor([0]))  # t=8: 4 rows left > slow's delay 3
    assert policy(env, obs).tolist() == [0]
    env.step(torch.tensor([0]))  # t=9: 3 rows left, a new slow plan would arrive too late
    assert policy(env, obs).tolist() == [2]
    env.step(torch.tensor([2]))  # t=10, slow observed at t=9 in flight
    env.kick_age[:] = 2  # kick + wait = t=10: the plan in flight does not know it: fast
    assert policy(env, obs).tolist() == [1]
    env.kick_age[:] = 3  # kick + wait = t=9: the plan in flight (observed at t=9) knows it
    assert policy(env, obs).tolist() == [0]


def test_calm_kicks_scenario_shows_the_executed_row():
    gcfg = road_gate_cfg("calm_kicks", 3)
    assert gcfg.kick_rate > 0 and gcfg.action_noise_std == 0.0 and gcfg.preview_steps[0] == 0
    assert [b.name for b in gcfg.budgets] == ["keep", "fast", "slow"]
    assert gcfg.budgets[2].horizon > gcfg.budgets[1].horizon and gcfg.budgets[2].compensate
    cfg = GateRunCfg(task_kwargs=dict(ROADS["calm_kicks"], max_episode_steps=60), num_envs=2,
                     gate=asdict(gcfg))
    env = make_gate_env(cfg, 2, 0)
    obs, *_ = env.step(torch.tensor([1, 1]))  # fast: arrives after one step
    # preview offset 0 = the plan's row executed at the next step (what the gate compares
    # the yaw rate with): the command the env will run
    assert bool(env.has_plan().all())
    assert torch.equal(obs["policy"][:, 7:9], env._row_now())
