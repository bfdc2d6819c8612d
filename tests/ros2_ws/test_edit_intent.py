"""The planner intent through the edit node over real rclpy: a chunk's ``intent/k`` columns are
split off by name and reach the loop's edit observation; an intent of another size than the
manifest's ``edit_obs.intent_dim`` is dropped and counted."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.edit_node_graph import wait_for
from tests.helpers.task_bundles import write_task_bundle

pytestmark = pytest.mark.ros

INTENT = [0.25, -0.75]


@pytest.fixture(scope="module")
def intent_bundle(tmp_path_factory) -> Path:
    return write_task_bundle(tmp_path_factory.mktemp("ros_intent") / "cartpole_intent",
                             intent_dim=len(INTENT))


@pytest.fixture
def graph_bundle(intent_bundle) -> Path:
    return intent_bundle


def _publish(probe, intent, value=0.1, rows=10):
    from edgerl_ros.messages import chunk_to_trajectory

    from edgerl.contract.chunk import ActionChunk

    now = time.perf_counter()
    chunk = ActionChunk(np.full((rows, 1), value), t0=now, dt=0.02, obs_time=now,
                        intent=intent)
    probe.chunk_pub.publish(chunk_to_trajectory(chunk, ["cart_force"], probe.tb))


def test_the_edit_node_feeds_the_chunks_intent_to_the_loop(graph):
    from rclpy.lifecycle import TransitionCallbackReturn as R

    node, probe = graph
    assert node.call(node.trigger_configure) == R.SUCCESS
    assert node.call(node.trigger_activate) == R.SUCCESS
    assert node.spec.edit_obs.intent_dim == len(INTENT)
    i0, i1 = next((a, b) for name, a, b in node.spec.edit_obs.layout() if name == "intent")

    def intent_read() -> bool:
        probe.publish_state()
        time.sleep(0.02)
        x = node.loop.backend.input[0]
        return node.loop.state == "ok" and np.array_equal(x[i0:i1], np.float32(INTENT))

    t_end = time.monotonic() + 10.0
    while time.monotonic() < t_end and not intent_read():
        _publish(probe, INTENT)
    assert intent_read(), (node.loop.state, node.loop.backend.input[0], node.drops.by_key())
    chunk = node.loop.buffer.latest()
    np.testing.assert_array_equal(chunk.intent, np.float32(INTENT))

    pushes = node.loop.buffer.pushes
    n = node.drops.total
    _publish(probe, [0.1, 0.2, 0.3])  # another size: dropped and counted, never pushed
    assert wait_for(lambda: node.drops.total > n), node.drops.by_key()
    assert node.drops.by_key().get("planner/chunk wrong_dim") == 1, node.drops.by_key()
    assert node.loop.buffer.pushes == pushes
