"""Per-task training defaults and the ``edgerl train`` flags that override them."""

from __future__ import annotations

import argparse

import pytest

from edgerl.apps.cli import CliError
from edgerl.apps.cli.train import add_arguments, config_from_args
from edgerl.policies.config import TrainConfig
from edgerl.policies.task_defaults import (
    BASELINE,
    CPU_DEFAULTS,
    GPU_DEFAULTS,
    TaskDefaults,
    apply_task_defaults,
    task_defaults,
)


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(list(argv))


def test_lookup_by_task_and_device():
    assert task_defaults("cartpole") == CPU_DEFAULTS["cartpole"]
    assert task_defaults("arm_reach") == BASELINE  # untuned task on the CPU
    assert task_defaults("cartpole", "cuda") == GPU_DEFAULTS["*"]
    assert GPU_DEFAULTS["*"].num_envs >= 4096
    # a tuned CPU network size never reaches the GPU defaults (the config's 128 x 128 stays)
    assert task_defaults("ball_balance") == CPU_DEFAULTS["ball_balance"]
    gpu = apply_task_defaults(TrainConfig(task="ball_balance", method="nodelay",
                                          device="cuda"))
    assert gpu.actor.hidden_dims == [128, 128] and gpu.ppo.gamma == 0.99
    assert gpu.num_envs == GPU_DEFAULTS["*"].num_envs


def test_apply_keeps_the_named_fields():
    cfg = TrainConfig(task="cartpole", method="nodelay", num_envs=7, num_steps_per_env=3)
    tuned = apply_task_defaults(cfg, keep=("num_envs",))
    d = CPU_DEFAULTS["cartpole"]
    assert tuned.num_envs == 7
    assert tuned.num_steps_per_env == d.num_steps_per_env
    assert tuned.ppo.learning_rate == d.learning_rate
    assert tuned.ppo.num_mini_batches == d.num_mini_batches
    assert tuned.ppo.num_learning_epochs == d.num_learning_epochs
    assert cfg.ppo.learning_rate == 1e-3  # the input is not modified


def test_cli_reads_task_defaults_and_flags_win():
    d = CPU_DEFAULTS["cartpole"]
    cfg = config_from_args(_args("cartpole", "--method", "nodelay"))
    assert (cfg.num_envs, cfg.num_steps_per_env) == (d.num_envs, d.num_steps_per_env)
    assert (cfg.ppo.learning_rate, cfg.ppo.num_mini_batches) == (d.learning_rate,
                                                                   d.num_mini_batches)
    cfg = config_from_args(_args("cartpole", "--num-envs", "9", "--steps-per-env", "5",
                                 "--learning-rate", "2e-4", "--mini-batches", "3"))
    assert (cfg.num_envs, cfg.num_steps_per_env) == (9, 5)
    assert (cfg.ppo.learning_rate, cfg.ppo.num_mini_batches) == (2e-4, 3)
    untuned = config_from_args(_args("arm_reach"))
    assert (untuned.num_envs, untuned.num_steps_per_env) == (64, 32)


@pytest.mark.parametrize("flag", ["--num-envs", "--steps-per-env", "--learning-rate",
                                  "--mini-batches"])
def test_cli_rejects_non_positive(flag):
    with pytest.raises(CliError, match=flag):
        config_from_args(_args("cartpole", flag, "0"))


def test_model_and_discount_defaults_reach_both_networks_and_ppo():
    """``hidden_dims`` sets the actor's and the critic's MLPs, ``gamma`` / ``desired_kl`` the
    PPO settings; ``None`` (BASELINE) and ``keep`` leave the config's values."""
    cfg = TrainConfig(task="ball_balance", method="nodelay")
    d = TaskDefaults(num_envs=8, hidden_dims=(16, 8), gamma=0.9, desired_kl=0.02)
    out = apply_task_defaults(cfg, d)
    assert out.actor.hidden_dims == [16, 8] and out.critic.hidden_dims == [16, 8]
    assert (out.ppo.gamma, out.ppo.desired_kl) == (0.9, 0.02)
    assert out.rsl_rl_cfg()["actor"]["hidden_dims"] == [16, 8]
    assert out.rsl_rl_cfg()["algorithm"]["gamma"] == 0.9
    kept = apply_task_defaults(cfg, d, keep=("hidden_dims", "gamma"))
    assert kept.actor.hidden_dims == [128, 128] and kept.ppo.gamma == 0.99
    assert kept.ppo.desired_kl == 0.02
    base = apply_task_defaults(cfg, BASELINE)
    assert base.actor.hidden_dims == cfg.actor.hidden_dims and base.ppo == cfg.ppo
    assert cfg.actor.hidden_dims == [128, 128]  # the input is not modified


@pytest.mark.parametrize("bad, match", [
    (dict(num_envs=0), "num_envs"), (dict(num_learning_epochs=0), "num_learning_epochs"),
    (dict(gamma=1.5), "gamma"), (dict(gamma=0.0), "gamma"), (dict(desired_kl=0.0), "desired_kl"),
    (dict(hidden_dims=()), "hidden_dims"), (dict(hidden_dims=(64, 0)), "hidden_dims"),
])
def test_bad_task_defaults_name_the_field(bad, match):
    with pytest.raises(ValueError, match=match):
        TaskDefaults(**bad)
