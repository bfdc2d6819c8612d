"""The whole pipeline on a gymnasium MuJoCo task at tiny size.

expert (PPO ``nodelay``) -> demos -> BC chunk planner -> delayed planner + ``edit`` (and the
baselines' envs) -> exported bundle -> ``edgerl.runtime.bundle.load_bundle``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from edgerl.policies.config import BCConfig, ModelConfig, TrainConfig
from edgerl.policies.methods import make_base_env, make_method_env
from edgerl.policies.runs import load_policy
from edgerl.policies.train import train

TASK = "gym:InvertedPendulum-v5"
TINY = {"num_envs": 8, "num_steps_per_env": 16, "actor": ModelConfig(hidden_dims=[32, 32]),
        "critic": ModelConfig(hidden_dims=[32, 32])}


@pytest.mark.slow
def test_gym_mujoco_pipeline_end_to_end(tmp_path):
    torch.set_num_threads(1)
    expert_cfg = TrainConfig(task=TASK, method="nodelay", iterations=6, **TINY)
    expert = train(expert_cfg, out=tmp_path / "expert", show_progress=False)
    assert len(expert.history) == 6 and expert.env_steps == 6 * 8 * 16

    edit_cfg = TrainConfig(
        task=TASK, method="edit", planner="bc", delay_steps=2, iterations=2,
        bc=BCConfig(demo_envs=8, demo_steps=48, epochs=8, batch_size=64, hidden_dims=[32, 32]),
        task_kwargs={"expert_run": str(tmp_path / "expert")}, **TINY)
    edit = train(edit_cfg, out=tmp_path / "edit", show_progress=False)
    doc = json.loads((tmp_path / "edit" / "config.json").read_text())
    assert doc["planner"]["kind"] == "bc" and doc["planner"]["samples"] == 8 * 48
    assert doc["planner"]["loss_last"] < doc["planner"]["loss_first"]
    assert doc["task_spec"]["name"] == TASK and doc["task_spec"]["control_hz"] == 25.0
    assert len(edit.history) == 2

    loaded = load_policy(tmp_path / "edit")
    # the BC planner's chunks stay inside the action limits
    base = make_base_env(loaded.config, 4, seed=5)
    try:
        obs = base.get_observations()["policy"]
        target = base.expert_action()  # the nodelay run, loaded lazily as the expert
        row0 = loaded.planner.plan(obs)[:, 0]
        assert row0.shape == (4, 1)
        assert torch.isfinite(row0).all() and row0.abs().max() <= 3.0
        for method in ("naive", "arli", "planner", "blend"):  # the baselines wrap the same task
            cfg = TrainConfig.from_dict({**loaded.config.to_dict(), "method": method})
            env = make_method_env(base, cfg, loaded.planner)
            o, r, d, _ = env.step(torch.zeros(4, env.num_actions))
            assert o["policy"].shape[0] == 4 and r.shape == (4,), method
        assert target.shape == (4, 1)
    finally:
        base.close()

    from edgerl.export.bundle import collect_parity_inputs, export_bundle
    from edgerl.runtime.bundle import load_bundle

    env = loaded.make_env(4, seed=1)
    try:
        inputs = collect_parity_inputs(loaded.actor.input_dim, env=env, n_recorded=200,
                                       n_random=800, seed=0)
    finally:
        env.close()
    report = export_bundle(loaded.actor, loaded.spec, tmp_path / "bundle", inputs,
                           planner=loaded.planner)
    assert report.ok
    spec, net = load_bundle(tmp_path / "bundle")
    assert spec.task == TASK and spec.method == "edit"
    assert spec.observation.names == ["obs0", "obs1", "obs2", "obs3"]
    assert (spec.action.low, spec.action.high) == ([-3.0], [3.0])
    assert spec.control_hz == 25.0 and spec.latency.planner_delay_steps == 2
    x = inputs[:1]
    net.input[...] = x
    out = np.array(net.infer())
    ref = loaded.actor(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(out, ref, atol=1e-5)


def test_task_args_flag_parses_json_or_strings():
    from edgerl.apps.cli import CliError
    from edgerl.apps.cli.train import parse_task_args

    got = parse_task_args(["expert_run=runs/gym:Pendulum-v1__nodelay", "action_low=[-1, -2]",
                           "vectorization=async", "control_hz=50"])
    assert got == {"expert_run": "runs/gym:Pendulum-v1__nodelay", "action_low": [-1, -2],
                   "vectorization": "async", "control_hz": 50}
    with pytest.raises(CliError, match="KEY=VALUE"):
        parse_task_args(["novalue"])
