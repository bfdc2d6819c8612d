"""``Deployment.from_bundle``: merge, stale rule, trigger and planner from the manifest."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from edgerl.contract.spec import PolicySpec
from edgerl.runtime.deployment import Deployment
from edgerl.runtime.edit_loop import LoopConfig
from tests.helpers.bundles import write_mlp_bundle


def _with_timing(path, **changes):
    data = json.loads((path / "manifest.json").read_text())
    data["timing"].update(changes)
    PolicySpec.from_dict(data).save(path)
    return path


def test_wiring_follows_the_manifest_timing(tmp_path):
    path = write_mlp_bundle(tmp_path / "rtc", method="blend", horizon=12, period_s=0.04)
    dep = Deployment.from_bundle(path, planner="none")
    assert (dep.buffer.merge.policy, dep.buffer.merge.blend_steps) == ("blend", 4)
    assert dep.loop.timing.stale_steps == 4 and dep.loop.trigger == "clock"
    assert dep.client is None
    replaced = Deployment.from_bundle(path, merge="replace", planner="none",
                                      loop_cfg=LoopConfig(trigger="state"))
    assert replaced.buffer.merge.policy == "replace" and replaced.loop.trigger == "state"
    state = Deployment.from_bundle(_with_timing(path, trigger="state"), planner="none")
    assert state.loop.trigger == "state"
    with pytest.raises(ValueError, match="planner must be auto, none, onnx or a Planner"):
        Deployment.from_bundle(path, planner="lqr")
    with pytest.raises(FileNotFoundError, match="has no planner network"):
        Deployment.from_bundle(path, planner="onnx")


def test_onnx_planner_feeds_the_loop(tmp_path):
    path = write_mlp_bundle(tmp_path / "edit", planner=True, hidden=(8,))
    sent = []
    dep = Deployment.from_bundle(path, lambda c, t: sent.append(c.copy()) or True,
                                 loop_cfg=LoopConfig(rate_hz=200.0, gc_freeze=False))
    assert dep.client is not None
    dep.loop.obs.write(np.zeros(4, np.float32), dep.loop.clock.now())
    dep.start()
    try:
        deadline = time.monotonic() + 10.0
        while dep.buffer.pushes < 2 and time.monotonic() < deadline:
            dep.loop.obs.write(np.zeros(4, np.float32), dep.loop.clock.now())  # a live sensor
            time.sleep(0.01)
        time.sleep(0.05)
    finally:
        dep.stop()
    assert dep.buffer.pushes >= 2 and dep.loop.metrics.planner_latency_s
    assert dep.loop.state == "ok" and len(sent) >= 5
    dep.episode_reset(dep.loop.clock.now())
    assert dep.buffer.latest() is None
