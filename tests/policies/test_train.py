"""Every method trains (2 PPO iterations, tiny) and writes a complete run directory;
checkpoint -> reload gives identical actions; the edit residual stays within its bound."""

from __future__ import annotations

import json

import pytest
import torch
from tensordict import TensorDict

from edgerl.contract.methods import METHODS
from edgerl.contract.serde import SchemaError
from edgerl.contract.spec import PolicySpec
from edgerl.policies.config import BCConfig, TrainConfig
from edgerl.policies.methods import make_base_env, make_method_env
from edgerl.policies.runs import find_latest_run, load_policy
from edgerl.policies.train import train


def _cfg(method: str, **kw) -> TrainConfig:
    base = dict(task="cartpole", method=method, delay_steps=3, seed=1, num_envs=8, iterations=2,
                num_steps_per_env=8)
    base.update(kw)
    return TrainConfig(**base)


@pytest.mark.parametrize("method", METHODS)
def test_each_method_trains_two_iterations(method, tmp_path):
    # rtc needs a planner that reads the committed prefix: a small BC planner
    small_bc = BCConfig(demo_envs=4, demo_steps=40, epochs=2)
    cfg = _cfg(method, **({"planner": "bc", "bc": small_bc} if method == "rtc" else {}))
    result = train(cfg, out=tmp_path / "run", show_progress=False)
    run = result.run_dir
    doc = json.loads((run / "config.json").read_text())
    assert doc["train"]["method"] == method
    # 3 steps at 50 Hz; nodelay is the D = 0 reference whatever D it is given
    assert doc["resolved"]["delay_ms"] == pytest.approx(0.0 if method == "nodelay" else 60.0)
    assert TrainConfig.from_dict(doc["train"]) == cfg
    if cfg.learned:
        lines = (run / "metrics.jsonl").read_text().splitlines()
        assert len(lines) == 2
        rows = [json.loads(x) for x in lines]
        assert [r["iteration"] for r in rows] == [0, 1]
        assert rows[1]["env_steps"] == 2 * 8 * 8
        assert rows[1]["sps"] > 0
        assert {"surrogate", "value"} <= set(rows[1]["losses"])
        assert (run / "model_1.pt").is_file()
        assert list(run.glob("events.out.tfevents.*"))
    else:
        assert not list(run.glob("model_*.pt"))
        assert result.history == []


def test_reload_gives_identical_actions(tmp_path):
    cfg = _cfg("edit", delay_steps=2)
    result = train(cfg, out=tmp_path / "run", show_progress=False)
    # the in-memory policy is the deployed one (an edit run's guard chose it)
    pol = load_policy(result.run_dir)
    assert pol.checkpoint.name == "model_deploy.pt"
    env = pol.make_env(4, seed=5)
    obs = env.get_observations()["policy"]
    assert obs.shape == (4, pol.actor.input_dim)
    with torch.no_grad():
        trained = result.policy(TensorDict({"policy": obs}, batch_size=[4]))
        reloaded = pol.actor(obs)
        again = load_policy(result.run_dir, checkpoint="model_deploy.pt").actor(obs)
    assert torch.equal(trained, reloaded)
    assert torch.equal(reloaded, again)
    assert not pol.actor.training
    # the spec is valid, round-trips through JSON and carries the run's latency settings
    spec = PolicySpec.from_json(pol.spec.to_json())
    assert spec.method == "edit" and spec.task == "cartpole"
    assert spec.latency.planner_delay_steps == 2
    assert spec.residual_bound == pytest.approx(1.0)  # half of the [-1, 1] range
    assert spec.edit_obs.dim == pol.actor.input_dim
    assert spec.chunk.horizon == cfg.resolved_horizon
    assert spec.files == {}
    mean, std = pol.actor.normalizer_stats()
    assert spec.observation.mean == pytest.approx(mean[:4].tolist())
    assert spec.observation.std == pytest.approx(std[:4].tolist())


def test_edit_residual_is_bounded(tmp_path):
    cfg = _cfg("edit", delay_steps=0, residual_bound=0.1)
    env = make_method_env(make_base_env(cfg, 16), cfg)
    layout = {name: (a, b) for name, a, b in env.edit_obs_cfg.layout()}
    c0, c1 = layout["chunk_now"]
    for huge in (1e6, -1e6, 3.0):
        obs = env.get_observations()["policy"]
        row = obs[:, c0:c1]
        has = obs[:, layout["has_chunk"][0]]
        assert torch.all(has == 1.0)  # D = 0: the chunk is there from step 0
        env.step(torch.full((16, 1), huge))
        delta = env.last_command - row
        sign = 1.0 if huge > 0 else -1.0
        expected = torch.clamp(row + sign * 0.1, -1.0, 1.0)
        assert torch.allclose(env.last_command, expected, atol=1e-6)
        assert torch.all(delta.abs() <= 0.1 + 1e-6)


def test_find_latest_run(tmp_path):
    a = train(_cfg("planner"), root=tmp_path, show_progress=False).run_dir
    b = train(_cfg("planner"), root=tmp_path, show_progress=False).run_dir
    assert a != b  # same second: suffixed, never overwritten
    found = find_latest_run("cartpole", "planner", root=tmp_path)
    assert found == b
    assert find_latest_run("cartpole", "planner", root=tmp_path, delay_steps=3, seed=1) == found
    with pytest.raises(FileNotFoundError, match="no run"):
        find_latest_run("cartpole", "edit", root=tmp_path)


def test_config_rejects_bad_values():
    with pytest.raises(SchemaError, match="method"):
        TrainConfig(task="cartpole", method="magic")
    with pytest.raises(SchemaError, match="delay_steps"):
        TrainConfig(task="cartpole", method="edit", delay_steps=-1)
    assert TrainConfig(task="cartpole", method="nodelay", delay_steps=5).delay_steps == 0


def test_bc_planner_run_saves_and_reloads_the_planner(tmp_path):
    from edgerl.policies.bc_planner import BCChunkPlanner
    from edgerl.policies.config import BCConfig

    cfg = _cfg("planner", planner="bc",
               bc=BCConfig(demo_envs=8, demo_steps=30, epochs=4, batch_size=64,
                           hidden_dims=[32]))
    run = train(cfg, out=tmp_path / "run", show_progress=False).run_dir
    doc = json.loads((run / "config.json").read_text())
    assert doc["planner"]["kind"] == "bc" and doc["planner"]["samples"] == 8 * 30
    assert doc["planner"]["loss_last"] < doc["planner"]["loss_first"]
    pol = load_policy(run)
    assert isinstance(pol.planner, BCChunkPlanner)
    assert pol.planner.horizon == cfg.resolved_horizon == pol.spec.chunk.horizon
    env = pol.make_env(4, seed=2)
    obs = env.get_observations()["robot"]
    chunk = pol.planner.plan(obs)
    assert chunk.shape == (4, cfg.resolved_horizon, 1)
    assert torch.equal(chunk, load_policy(run).planner.plan(obs))
    # the wrapper executes the BC chunk's rows: the chunk planned on the step-0 observation
    # arrives at step D = 3 and its row 3 is the command then
    for _ in range(3):
        env.step(torch.zeros(4, 1))
        assert torch.all(env.last_command == 0.0)  # no chunk yet: zeros
    env.step(torch.zeros(4, 1))
    assert torch.allclose(env.last_command, chunk[:, 3])
    assert torch.any(env.last_command != 0.0)


def test_stop_at_success_ends_training_early_and_saves(tmp_path):
    # 10-step episodes that the expert-planned edit policy survives from the first iteration
    from edgerl.policies.config import GuardConfig

    cfg = _cfg("edit", delay_steps=0, num_envs=32, num_steps_per_env=16, iterations=5,
               stop_at_success=0.9, task_kwargs={"max_episode_steps": 10},
               guard=GuardConfig(episodes=0))  # without the validation guard: the best wins
    result = train(cfg, out=tmp_path / "run", show_progress=False)
    assert len(result.history) == 1
    assert result.history[0]["success_rate"] >= 0.9
    assert (result.run_dir / "model_0.pt").is_file()
    assert len((result.run_dir / "metrics.jsonl").read_text().splitlines()) == 1
    assert load_policy(result.run_dir).checkpoint.name == "model_best.pt"


def test_best_checkpoint_is_saved_and_loaded_by_default(tmp_path):
    cfg = _cfg("nodelay", num_envs=32, num_steps_per_env=16, iterations=3,
               task_kwargs={"max_episode_steps": 10})
    result = train(cfg, out=tmp_path / "run", show_progress=False)
    best = result.run_dir / "model_best.pt"
    assert best.is_file()
    infos = torch.load(best, weights_only=False)["infos"]
    scores = [(r["success_rate"], r["return_mean"]) for r in result.history]
    assert infos["best_iteration"] == max(range(3), key=lambda i: (scores[i], -i))
    assert load_policy(result.run_dir).checkpoint.name == "model_best.pt"
    assert load_policy(result.run_dir, checkpoint="model_2.pt").checkpoint.name == "model_2.pt"


def test_split_task_manifest_matches_the_training_wrapper(tmp_path):
    """The exported edit_obs is the wrapper's (fast subset only); planner-only elements get
    an identity normaliser in the manifest."""
    cfg = TrainConfig(task="cartpole_goal", method="edit", delay_steps=3, seed=1, num_envs=8,
                      iterations=1, num_steps_per_env=8)
    result = train(cfg, out=tmp_path / "run", show_progress=False)
    pol = load_policy(result.run_dir)
    env = pol.make_env(4, seed=5)
    assert pol.spec.edit_obs == env.edit_obs_cfg
    assert pol.spec.edit_obs.obs_indices == [0, 1, 2, 3]
    assert pol.actor.input_dim == env.edit_obs_cfg.dim
    goal = pol.spec.observation.names.index("goal_x")
    assert (pol.spec.observation.mean[goal], pol.spec.observation.std[goal]) == (0.0, 1.0)
    assert pol.spec.observation.std[0] != 1.0  # the fast elements carry the trained normaliser


def test_an_edit_run_deploys_the_validation_guards_choice(tmp_path):
    """By default an edit run is warm-started, then the deployed actor is chosen on held-out
    episodes among the final, the best-training, the warm-start and the planner-alone ones."""
    from edgerl.policies.config import DistillConfig, GuardConfig

    cfg = _cfg("edit", delay_steps=2, num_envs=16, num_steps_per_env=8, iterations=2,
               task_kwargs={"max_episode_steps": 10},
               distill=DistillConfig(rounds=1, steps=8, epochs=2), guard=GuardConfig(episodes=4))
    result = train(cfg, out=tmp_path / "run", show_progress=False)
    doc = json.loads((result.run_dir / "config.json").read_text())
    assert doc["distill"]["teacher"] == "task expert" and len(doc["distill"]["losses"]) == 1
    guard = doc["guard"]
    assert set(guard["scores"]) == {"final", "best", "warm", "planner"}
    assert guard["reference"]["name"] == "task expert"  # the privileged expert bounds the rate
    best = max(guard["scores"], key=lambda k: (guard["scores"][k]["success_rate"],
                                               guard["scores"][k]["return_mean"]))
    assert guard["deployed"] == best
    pol = load_policy(result.run_dir)
    assert pol.checkpoint.name == "model_deploy.pt"
    deployed = torch.load(pol.checkpoint, weights_only=False)
    assert deployed["infos"]["deployed"] == best
