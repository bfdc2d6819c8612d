"""The gate's PPO training (tiny) and its comparison with every baseline."""

from __future__ import annotations

import pytest
import torch

from edgerl.policies.gate.baselines import age_heuristic, evaluate_gate
from edgerl.policies.gate.policy import (
    GATE_NAME,
    ROADS,
    ScoreActions,
    compare_gate,
    gate_with_latencies,
    load_gate,
    make_gate_env,
    road_gate_cfg,
    train_gate,
    tune_heuristic,
)
from tests.helpers.gate_env import tiny_cfg

pytestmark = pytest.mark.slow



def test_score_actions_runs_the_best_scored_budget():
    env = ScoreActions(make_gate_env(tiny_cfg(), 2, 0))
    assert env.num_actions == env.env.num_budgets == 3
    env.step(torch.tensor([[0.0, 0.0, 1.0], [0.0, 2.0, -1.0]]))
    assert env.env.last_choice.tolist() == [2, 1]


def test_two_iteration_training_and_every_baseline(tmp_path):
    torch.set_num_threads(1)
    cfg = tiny_cfg()
    gate, history = train_gate(cfg, tmp_path)
    assert len(history) == 2 and (tmp_path / GATE_NAME).is_file()
    assert list(tmp_path.glob("model_*.pt"))
    env = make_gate_env(cfg, 3, 1)
    choice = gate(env, env.get_observations())
    assert choice.shape == (3,) and choice.dtype == torch.int64
    assert bool(((choice >= 0) & (choice < 3)).all())
    loaded_cfg, loaded = load_gate(tmp_path)
    assert loaded_cfg == cfg
    assert torch.equal(loaded(env, env.get_observations()), choice)
    rows = compare_gate(cfg, loaded, episodes=2, num_envs=2, ages=(4, 16))
    names = [r["policy"] for r in rows]
    assert names[:3] == ["gate", "fixed:fast", "fixed:slow"]
    assert names[3].startswith("heuristic(age>") and names[3].endswith((":slow)", ":fast)"))
    assert names[4] == "random"
    assert rows[3]["tuned_x"] in (4, 16) and rows[3]["tune_seed"] == cfg.seed + 2000
    for r in rows:
        assert r["episodes"] == 2 and 0.0 <= r["success_rate"] <= 1.0
        shares = [r[f"share_{b}"] for b in ("keep", "fast", "slow")]
        assert sum(shares) == pytest.approx(1.0, abs=1e-3)
    assert rows[1]["share_fast"] == 1.0


def test_budget_latencies_from_a_measured_model(tmp_path):
    from edgerl.contract.spec import LatencyModel
    from edgerl.runtime.planners.latency_model import save_latency_model

    path = save_latency_model(LatencyModel(planner_delay_steps=3,
                                           delay_distribution=[0.0, 0.5, 0.0, 0.5]),
                              tmp_path / "slow.json")
    cfg = tiny_cfg(gate=gate_with_latencies({"slow": path}))
    budgets = cfg.gate_cfg(5).budgets
    assert budgets[2].latency.delay_distribution == [0.0, 0.5, 0.0, 0.5]
    assert budgets[2].compensate and budgets[1].latency.planner_delay_steps == 1
    env = make_gate_env(cfg, 2, 0)
    assert env.scheduler.max_delay == 3


def test_heuristic_is_tuned_on_other_episodes_than_the_evaluation():
    torch.set_num_threads(1)
    cfg = tiny_cfg(seed=3)
    best, tried = tune_heuristic(cfg, episodes=2, num_envs=2, seed=7, ages=(2, 8, 32))
    assert len(tried) == 2 * 3  # both plan budgets x every X
    assert {(r["budget"], r["x"]) for r in tried} == {(j, x) for j in (1, 2) for x in (2, 8, 32)}
    assert best["return_mean"] == max(r["return_mean"] for r in tried)
    rows = compare_gate(cfg, None, episodes=2, num_envs=2, seed=5, tune_seed=7, ages=(2, 8, 32))
    heur = next(r for r in rows if r["policy"].startswith("heuristic("))
    assert (heur["tuned_x"], heur["tune_seed"]) == (best["x"], 7)
    assert heur["tune_return"] == best["return_mean"]
    # its reported return is the evaluation episodes' (seed 5), not the tuning ones'
    on_eval = evaluate_gate(lambda: make_gate_env(cfg, 2, 5),
                            age_heuristic(best["budget"], best["x"]), 2)
    assert heur["return_mean"] == on_eval["return_mean"]
    with pytest.raises(ValueError, match="other episodes"):
        compare_gate(cfg, None, episodes=2, num_envs=2, seed=5, tune_seed=5, ages=(2,))


def test_chicanes_scenario_budgets_and_preview():
    gcfg = road_gate_cfg("chicanes", 4)
    assert [b.name for b in gcfg.budgets] == ["keep", "fast", "slow"]
    assert gcfg.preview_steps == (8, 16, 24, 32) and gcfg.seed == 4
    assert all(b.cost > 0 for b in gcfg.budgets[1:]) and gcfg.budgets[2].compensate
    kwargs = dict(ROADS["chicanes"], goal_distance=40.0, max_episode_steps=60)
    from dataclasses import asdict

    cfg = tiny_cfg(gate=asdict(gcfg))
    cfg.task_kwargs = kwargs
    env = make_gate_env(cfg, 2, 0)
    assert env.policy_obs_dim == 3 + 4 + 4 * 2  # speed, lat vel, yaw rate; preview 4 x 2
    obs, *_ = env.step(torch.tensor([2, 2]))  # slow: arrives 16 steps (8 decisions) later
    for _ in range(8):
        obs, *_ = env.step(torch.zeros(2))
    # the running slow plan's rows 8-32 steps ahead show the road ahead (non-zero commands)
    assert bool(env.has_plan().all()) and float(obs["policy"][:, 7:].abs().sum()) > 0
    with pytest.raises(ValueError, match="unknown road 'mud'"):
        road_gate_cfg("mud")
