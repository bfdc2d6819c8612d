"""MuJoCo Warp batch: without ``mujoco_warp`` installed it fails with a clear message."""

from __future__ import annotations

import importlib.util

import pytest

from edgerl.sim.mujoco.backends import load_model
from edgerl.sim.mujoco.warp import WarpBatch


@pytest.mark.skipif(importlib.util.find_spec("mujoco_warp") is not None,
                    reason="mujoco_warp is installed")
def test_warp_backend_is_gated_with_a_clear_message():
    with pytest.raises(ImportError, match="MuJoCo Warp, which is not installed"):
        WarpBatch(load_model("arm_planar.xml"), 4)
