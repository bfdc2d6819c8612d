"""``edgerl.sim.overhead``: a MuJoCo task's step rate as a ratio to its raw backend."""

from __future__ import annotations

import pytest

from edgerl.sim.overhead import overhead_ratio


def test_ratio_is_best_over_best():
    out = overhead_ratio("arm_reach", num_envs=4, steps=3, blocks=2, warmup=1)
    assert out["steps_per_s"] > 0 and out["raw_physics_steps_per_s"] > 0
    assert out["ratio"] == pytest.approx(out["steps_per_s"] / out["raw_physics_steps_per_s"],
                                         rel=1e-2)
    assert out["median_pair_ratio"] > 0
    assert (out["num_envs"], out["steps"], out["blocks"]) == (4, 3, 2)


def test_torch_task_is_a_named_error():
    with pytest.raises(ValueError, match="not a MuJoCo task"):
        overhead_ratio("cartpole", num_envs=2, steps=1, blocks=1)


def test_bad_sizes():
    with pytest.raises(ValueError, match=">= 1"):
        overhead_ratio("arm_reach", blocks=0)
