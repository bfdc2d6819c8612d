"""``edgerl.bench.train.throughput``: our trainer / rsl-rl-lib's bare runner, interleaved pairs."""

from __future__ import annotations

import pytest

from edgerl.bench.train.throughput import ThroughputCfg, compare


def test_compare_gives_the_median_of_pair_ratios():
    row = compare(ThroughputCfg(task="cartpole", num_envs=4, steps_per_env=4, iterations=1,
                                repeats=2))
    assert row["task"] == "cartpole" and row["num_envs"] == 4 and row["repeats"] == 2
    assert len(row["pairs"]) == 2
    ratios = sorted(o / b for o, b in row["pairs"])
    assert all(o > 0 and b > 0 for o, b in row["pairs"])
    assert row["ratio"] == pytest.approx(sum(ratios) / 2, rel=1e-2)  # median of two
    assert row["ours_steps_per_s"] > 0 and row["bare_steps_per_s"] > 0


def test_same_sizes_for_both_runners():
    cfg = ThroughputCfg(task="ball_balance", num_envs=12, steps_per_env=5).train_config()
    assert (cfg.num_envs, cfg.num_steps_per_env) == (12, 5)  # kept, not the task's defaults
    assert cfg.method == "nodelay"


@pytest.mark.parametrize("key", ["num_envs", "steps_per_env", "iterations", "repeats"])
def test_bad_sizes_are_named(key):
    with pytest.raises(ValueError, match=key):
        ThroughputCfg(task="cartpole", **{key: 0})
