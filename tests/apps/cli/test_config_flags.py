"""Flags generated from config dataclasses (apps/cli/config_flags.py) and ``edgerl train``'s."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import pytest

from edgerl.apps.cli import main
from edgerl.apps.cli.config_flags import (
    add_dataclass_flags,
    dataclass_flags,
    field_docs,
    flag_values,
    replace_paths,
)
from edgerl.apps.cli.train import CONFIG_FLAGS, add_arguments, config_flag_specs, config_from_args
from edgerl.policies.config import BCConfig, DistillConfig, GuardConfig, PPOConfig, TrainConfig
from edgerl.policies.task_defaults import apply_task_defaults


@dataclass(frozen=True)
class Inner:
    """Nested part.

    Attributes:
        rate: Step size ``alpha``
            in 1/s.
    """

    rate: float = 0.5


@dataclass(frozen=True)
class Toy:
    """A toy config.

    Attributes:
        name / alias: What to call it.
        fast: Go fast.
        limit: Optional cap.
        sizes: Layer sizes.
    """

    name: str = "a"
    alias: str = "b"
    fast: bool = False
    limit: int | None = None
    sizes: tuple[int, ...] = (4, 4)
    mode: str = field(default="x", metadata={"choices": ("x", "y"), "help": "which mode"})
    inner: Inner = field(default_factory=Inner)


def _parse(argv: list[str], include=("name", "fast", "limit", "sizes", "mode", "inner.rate")):
    p = argparse.ArgumentParser()
    flags = add_dataclass_flags(p, Toy, include)
    return p, flag_values(p.parse_args(argv), flags)


def test_field_docs_read_the_attributes_section():
    docs = field_docs(Toy)
    assert docs["name"] == docs["alias"] == "What to call it."
    assert field_docs(Inner)["rate"] == "Step size alpha in 1/s."  # joined, literals plain


def test_types_defaults_and_choices_come_from_the_fields():
    _, values = _parse([])
    assert values == {"name": "a", "fast": False, "limit": None, "sizes": (4, 4), "mode": "x",
                      "inner.rate": 0.5}
    _, values = _parse(["--fast", "--limit", "3", "--sizes", "8", "16", "--mode", "y",
                        "--rate", "0.25"])
    assert values == {"name": "a", "fast": True, "limit": 3, "sizes": (8, 16), "mode": "y",
                      "inner.rate": 0.25}
    assert _parse(["--no-fast"])[1]["fast"] is False
    with pytest.raises(SystemExit):
        _parse(["--mode", "z"])


def test_replace_paths_builds_a_new_config_and_keeps_the_old():
    toy = Toy()
    new = replace_paths(toy, {"name": "c", "inner.rate": 2.0})
    assert (new.name, new.inner.rate) == ("c", 2.0) and (toy.name, toy.inner.rate) == ("a", 0.5)


def test_help_from_metadata_docstring_and_missing_help_is_an_error():
    p, _ = _parse([])
    text = p.format_help()
    assert "which mode (default: x)" in text and "Go fast (default: False)" in text

    @dataclass
    class NoDoc:
        x: int = 0

    with pytest.raises(ValueError, match="no help"):
        dataclass_flags(NoDoc, ["x"])


def test_every_train_flag_has_help_and_is_listed(capsys):
    flags = dataclass_flags(**config_flag_specs())
    assert [f.path for f in flags] == list(CONFIG_FLAGS)
    assert all(f.help.split(" (default")[0].strip() for f in flags)
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    for flag in flags:
        assert flag.flag in text, flag.flag
    for old in ("--steps-per-env", "--mini-batches", "--learning-rate", "--privileged",
                "--latency-model", "--task-arg", "--threads", "--out", "--root"):
        assert old in text


def _config(*argv: str) -> TrainConfig:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return config_from_args(p.parse_args(list(argv)))


@pytest.mark.parametrize("argv, expected", [
    (["cartpole"], dict(method="edit")),
    (["cartpole", "--method", "naive", "--delay-steps", "2", "--seed", "4", "--num-envs", "8",
      "--iterations", "2", "--steps-per-env", "8"],
     dict(method="naive", delay_steps=2, seed=4, iterations=2, num_envs=8,
          num_steps_per_env=8)),
    (["ball_balance", "--method", "edit", "--delay-steps", "5", "--iterations", "200"],
     dict(method="edit", delay_steps=5, iterations=200)),
    (["cartpole_goal", "--method", "nodelay", "--privileged"],
     dict(method="nodelay", privileged=True)),
    (["cartpole", "--planner", "bc", "--delay-steps", "2", "--edit-inputs", "full", "--trigger",
      "clock", "--horizon", "12", "--period-steps", "3", "--residual-bound", "0.5",
      "--stop-at-success", "0.9", "--task-arg", "x=1", "--task-arg", "y=abc",
      "--learning-rate", "3e-4", "--mini-batches", "2"],
     dict(method="edit", planner="bc", delay_steps=2, edit_inputs="full", trigger="clock",
          horizon=12, period_steps=3, residual_bound=0.5, stop_at_success=0.9,
          task_kwargs={"x": 1, "y": "abc"},
          ppo=dict(learning_rate=3e-4, num_mini_batches=2))),
    (["cartpole_goal", "--planner", "bc", "--intent-dim", "4", "--warm-start-rounds", "2",
      "--guard-episodes", "0", "--planner-prefix", "--smooth-weight", "0.5"],
     dict(method="edit", planner="bc", intent_dim=4, planner_prefix=True, smooth_weight=0.5,
          distill=DistillConfig(rounds=2), guard=GuardConfig(episodes=0))),
])
def test_flags_build_the_same_train_config(argv, expected):
    expected = dict(expected)
    ppo = expected.pop("ppo", {})
    tuned = {k: expected.pop(k) for k in ("num_envs", "num_steps_per_env") if k in expected}
    want = apply_task_defaults(TrainConfig(task=argv[0], **expected))
    want = replace_paths(want, {**tuned, **{f"ppo.{k}": v for k, v in ppo.items()}})
    assert _config(*argv) == want


def test_config_is_frozen():
    cfg = _config("cartpole")
    with pytest.raises(AttributeError):
        cfg.seed = 3  # type: ignore[misc]
    assert isinstance(cfg.ppo, PPOConfig) and isinstance(cfg.bc, BCConfig)


def test_untuned_defaults_in_the_help_are_the_task_baseline():
    """The help of a task-defaulted flag names the field's default as the untuned value."""
    from edgerl.policies.task_defaults import BASELINE

    cfg = TrainConfig(task="x", method="edit")
    assert (BASELINE.num_envs, BASELINE.num_steps_per_env) == (cfg.num_envs,
                                                               cfg.num_steps_per_env)
    assert (BASELINE.learning_rate, BASELINE.num_mini_batches) == (cfg.ppo.learning_rate,
                                                                   cfg.ppo.num_mini_batches)


def test_soak_flags_come_from_soak_config(capsys):
    """`edgerl soak`'s flags are SoakConfig's fields: every one in --help with the field's
    docstring, and a parsed command line builds the config the old hand-written flags did."""
    from pathlib import Path

    from edgerl.apps.cli.config_flags import dataclass_flags, field_docs, flag_values
    from edgerl.apps.cli.soak import FLAG_FIELDS, FLAG_NAMES
    from edgerl.apps.cli.soak import add_arguments as soak_arguments
    from edgerl.apps.soak.config import SoakConfig

    parser = argparse.ArgumentParser(prog="edgerl soak")
    soak_arguments(parser)
    text = parser.format_help()
    docs = field_docs(SoakConfig)
    for name in FLAG_FIELDS:
        flag = "--" + FLAG_NAMES.get(name, name.replace("_", "-"))
        assert flag in text, flag
        assert docs[name].split()[0] in text
    args = parser.parse_args(["--bundle", "b", "--minutes", "0.5", "--kill-every", "3",
                              "--rearm-after", "0", "--no-serial", "--domain-id", "7"])
    values = flag_values(args, dataclass_flags(SoakConfig, FLAG_FIELDS, names=FLAG_NAMES))
    cfg = SoakConfig(bundle=args.bundle, **values)
    assert cfg == SoakConfig(bundle=Path("b"), minutes=0.5, kill_every_s=3.0,
                             rearm_after_s=0.0, serial=False, domain_id=7)
