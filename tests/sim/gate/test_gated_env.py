"""The gated environment: budget delays to the step, keep, resets, shapes, bad indices."""

from __future__ import annotations

import pytest
import torch

from edgerl.contract.spec import LatencyModel
from edgerl.sim.gate.budgets import KEEP, PlanBudget
from edgerl.sim.gate.env import GATE_EXTRA_OBS, GateCfg, GatedEnv
from edgerl.sim.vec_env import ActionError
from tests.helpers.gate_env import BUDGETS, StampTask


def make(num_envs=2, length=1000, **kwargs):
    inner = StampTask(num_envs, length)
    return GatedEnv(inner, GateCfg(budgets=BUDGETS, **kwargs)), inner


def drive(env, choices):
    """Step with each env choosing ``choices[t]``; the applied commands (T_inner, N)."""
    for c in choices:
        env.step(torch.full((env.num_envs, 1), float(c)))
    return torch.stack(env.unwrapped.applied)[:, :, 0]


def test_plan_starts_at_query_plus_delay_and_keep_keeps_it():
    env, _ = make()
    # t=0: slow (D=3) -> adopted at t=3, row 3; t=5: fast (D=1) -> adopted at t=6, row 1
    applied = drive(env, [2, 0, 0, 0, 0, 1, 0, 0, 0])
    expected = [0, 0, 0, 1003, 1004, 1005, 6001, 6002, 6003]
    assert applied[:, 0].tolist() == expected
    assert applied[:, 1].tolist() == expected
    # the fast plan has 4 rows: past them (stale_steps = 0) the command is zero
    applied = drive(env, [0])
    assert applied[-1, 0].item() == 0.0
    assert not bool(env.has_plan().any())


def test_measured_delay_distribution_and_decision_steps():
    budgets = (KEEP, PlanBudget("m", delay=LatencyModel(delay_distribution=[0.0, 0.0, 1.0]),
                                horizon=8))
    env = GatedEnv(StampTask(1), GateCfg(budgets=budgets, decision_steps=3))
    _, _, _, extras = env.step(torch.tensor([[1.0]]))
    env.step(torch.tensor([[0.0]]))
    applied = torch.stack(env.unwrapped.applied)[:, 0, 0].tolist()
    assert applied == [0, 0, 1002, 1003, 1004, 1005]  # D = 2, k = 3 control steps a decision
    assert env.max_episode_length == 334
    assert extras["log"]["/gate/replan_rate"] == 1.0


def test_observation_reward_and_shapes():
    env, inner = make(num_envs=3)
    obs = env.get_observations()
    assert env.num_actions == 1 and env.num_budgets == 3
    assert GATE_EXTRA_OBS[:4] == ("chunk_age", "rows_left", "has_chunk", "in_flight")
    assert obs["policy"].shape == (3, 2 + 4) == (3, env.policy_obs_dim)  # no preview
    assert obs["critic"].shape == (3, env.policy_obs_dim + 2)
    obs, rew, dones, extras = env.step(torch.tensor([1, 0, 2]))
    assert rew.tolist() == [-0.5, 0.0, 0.0]  # the fast budget's cost
    assert dones.shape == (3,) and extras["time_outs"].shape == (3,)
    obs, *_ = env.step(torch.zeros(3))
    # env 0: fast plan adopted at t=1, now t=2: age 2, rows left 4 - 2, has plan, none flying
    assert obs["policy"][0, 2:].tolist() == pytest.approx([2 / 20, 2 / 20, 1.0, 0.0])
    # env 2: slow plan still in flight
    assert obs["policy"][2, 2:].tolist() == [0.0, 0.0, 0.0, 1.0]
    env_no_cost = GatedEnv(StampTask(1), GateCfg(budgets=BUDGETS, use_cost=False))
    assert env_no_cost.step(torch.tensor([1]))[1].tolist() == [0.0]


def test_episode_end_and_reset_clear_plans():
    env, inner = make(num_envs=1, length=4)
    dones = [bool(env.step(torch.tensor([c]))[2][0]) for c in (2, 0, 0, 0)]
    assert dones == [False, False, False, True]
    assert not bool(env.has_plan().any()) and env.cur_rows.tolist() == [0]
    env.step(torch.tensor([2]))  # in flight now
    obs = env.reset()
    assert obs["policy"][0, 2:].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert drive(env, [0, 0, 0, 0])[-4:, 0].tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("bad, match", [
    (torch.tensor([3, 0]), "budget index 3 out of range; budgets: 0=keep, 1=fast, 2=slow"),
    (torch.tensor([-1, 0]), "out of range"),
    (torch.tensor([0.5, 0.0]), "whole budget indices"),
    (torch.zeros(2, 3), "shape"),
    ([0, 1], "torch.Tensor"),
])
def test_bad_budget_index_is_a_clear_error(bad, match):
    env, _ = make()
    with pytest.raises(ActionError, match=match):
        env.step(bad)


def test_config_validation():
    with pytest.raises(ValueError, match="unique"):
        GateCfg(budgets=(KEEP, KEEP))
    with pytest.raises(ValueError, match="decision_steps"):
        GateCfg(decision_steps=0)


def test_committed_rows_foresee_plans_in_flight():
    env, _ = make(num_envs=1)
    env.step(torch.tensor([1]))  # t=0: fast (D=1, 4 rows, step0 0), running from t=1
    env.step(torch.tensor([2]))  # t=1: slow (D=3, 12 rows, step0 1) arrives at t=4
    env._next_delay[:] = 3  # a query at t=2 with delay 3 commits the rows of t = 2, 3, 4
    rows = env.committed_rows(torch.tensor([0]))[0, :, 0]
    # the fast plan's rows 2, 3, then the slow plan (arrived at t=4) from its row 3
    assert rows.tolist() == [1002.0, 1003.0, 2003.0]
    env._next_delay[:] = 1
    rows = env.committed_rows(torch.tensor([0]))[0, :, 0]
    assert rows[0].item() == 1002.0 and bool(rows[1:].isnan().all())


def test_plan_preview_and_per_element_noise():
    env, _ = make(num_envs=1, preview_steps=(0, 1, 2))
    assert env.policy_obs_dim == 2 + 4 + 3 and env.spec_gate.extra[-1] == "plan_preview"
    assert env.get_observations()["policy"][0, 6:].tolist() == [0.0, 0.0, 0.0]
    env.step(torch.tensor([1]))  # fast: 4 rows from t=1 (row i = 1000 + i)
    obs, *_ = env.step(torch.tensor([0]))  # now t=2: rows 2, 3 planned, row 4 past the plan
    assert obs["policy"][0, 6:].tolist() == [1002.0, 1003.0, 0.0]
    noisy = GatedEnv(StampTask(2), GateCfg(budgets=BUDGETS, action_noise_std=(0.5,)))
    drive(noisy, [0] * 50)
    applied = torch.stack(noisy.unwrapped.applied)
    assert 0.3 < float(applied.std()) < 0.7
    with pytest.raises(ValueError, match="2 stds for 1 action"):
        GatedEnv(StampTask(1), GateCfg(budgets=BUDGETS, action_noise_std=(0.1, 0.2)))
    with pytest.raises(ValueError, match="preview_steps"):
        GateCfg(preview_steps=(-1,))


def test_signal_dependent_noise_grows_with_the_command():
    # no plan: the command is 0, so only the constant part acts; with a plan (rows ~1000+)
    # the gain part dominates: std = 0.01 + 0.001 * |row|
    env = GatedEnv(StampTask(2), GateCfg(budgets=BUDGETS, action_noise_std=0.01,
                                         action_noise_gain=0.001))
    drive(env, [0] * 40)
    calm = torch.stack(env.unwrapped.applied)
    assert 0.005 < float(calm.std()) < 0.02
    env.unwrapped.applied.clear()
    drive(env, [1] * 40)  # a fast plan every step: rows 1000 * (step + 1) + i
    rows = torch.stack(env.unwrapped.applied)[:, :, 0]
    resid = rows - torch.round(rows)
    assert float(resid.abs().max()) > 0.3  # ~1 std at |row| ~ 1000
    with pytest.raises(ValueError, match="action_noise_gain"):
        GateCfg(action_noise_gain=-0.1)


def test_kicks_start_at_their_rate_last_their_steps_and_leave_other_streams_alone():
    base, _ = make(num_envs=64, action_noise_std=0.1)
    kicked, _ = make(num_envs=64, action_noise_std=0.1, kick_rate=0.05, kick_size=2.0,
                     kick_steps=3)
    drive(base, [0] * 200)
    starts = 0
    for _ in range(200):  # one control step per decision here
        kicked.step(torch.zeros(64, 1))
        starts += int((kicked.kick_age == 0).sum())
    a = torch.stack(base.unwrapped.applied)[:, :, 0]  # no plan: the process noise only
    k = torch.stack(kicked.unwrapped.applied)[:, :, 0] - a  # same noise draws: the kicks
    assert float(a.std()) > 0.05
    assert bool(((k.abs() < 1e-5) | ((k.abs() - 2.0).abs() < 1e-5)).all())
    k = torch.round(k)
    on = float((k != 0).sum())
    assert on == 3 * starts or 0 < 3 * starts - on <= 3 * 64  # 3 steps each (last ones cut)
    free = 200 * 64 - on  # a kick starts only where none runs
    assert 0.035 < starts / free < 0.065
    assert int(kicked.kick_age.min()) >= 0
    with pytest.raises(ValueError, match="kicks need"):
        GateCfg(kick_rate=1.5)
    with pytest.raises(ValueError, match="kicks need"):
        GateCfg(kick_steps=0)


def test_manifest_budgets_carry_every_plan_budget_field():
    import dataclasses

    from edgerl.sim.gate.env import BUDGET_FIELDS, gate_spec, plan_budgets

    names = {f.name for f in dataclasses.fields(PlanBudget)}
    assert names - {"delay"} == set(BUDGET_FIELDS)  # a new knob must reach the manifest
    budgets = (KEEP, PlanBudget("small", delay=1, horizon=4, hold=2, noise_std=0.1, gain=0.5,
                                cost=0.2),
               PlanBudget("slow", delay=LatencyModel(planner_delay_steps=3), horizon=12,
                          compensate=True))
    back = plan_budgets(gate_spec(GateCfg(budgets=budgets), [0]))
    assert [(b.name, b.latency, b.horizon, b.hold, b.noise_std, b.gain, b.cost, b.keep,
             b.compensate) for b in back] == \
        [(b.name, b.latency, b.horizon, b.hold, b.noise_std, b.gain, b.cost, b.keep,
          b.compensate) for b in budgets]
