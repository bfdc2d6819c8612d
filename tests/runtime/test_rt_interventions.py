"""EditLoop with operator interventions: an override replaces the policy's command (through
the safety filter) and is logged with its start; e-stop latches; the transition log."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.clock import VirtualClock
from edgerl.contract.intervention import Intervention
from edgerl.runtime.bundle import load_bundle
from edgerl.runtime.chunk_buffer import ChunkBuffer
from edgerl.runtime.edit_loop import EditLoop
from edgerl.runtime.transition_log import TransitionLog

DT = 0.01


def _loop(bundle):
    spec, net = load_bundle(bundle, warmup=1)
    loop = EditLoop(spec, net, ChunkBuffer(), clock=VirtualClock(0.0))
    loop.buffer.push(ActionChunk(actions=np.full((10, 2), 0.1, np.float32), t0=0.0, dt=DT,
                                 obs_time=0.0))
    loop.log_transitions(capacity=64)
    return loop


def test_override_is_executed_logged_and_released(mlp_bundle):
    loop = _loop(mlp_bundle)
    obs = np.array([0.1, -0.2, 0.3, 0.0], np.float32)
    loop.obs.write(obs, 0.0)
    own = loop.tick(0.0).copy()
    loop.interventions.push(Intervention("override", 0.005, np.array([0.7, -3.0], np.float32)),
                            0.005)
    cmd = loop.tick(DT).copy()
    np.testing.assert_allclose(cmd, [0.7, -1.0])  # the operator's, clipped to the limits
    assert loop.safety.interventions()["clip"] == 1 and loop.state == "ok"
    loop.tick(2 * DT)
    loop.interventions.push(Intervention("release", 0.025), 0.025)
    back = loop.tick(3 * DT).copy()
    assert not np.allclose(back, [0.7, -1.0])
    rows = loop.transitions.drain()
    assert rows["intervened"].tolist() == [False, True, True, False]
    assert rows["start"].tolist() == [False, True, False, False]
    np.testing.assert_allclose(rows["command"][0], own)
    np.testing.assert_allclose(rows["command"][1], [0.7, -1.0])
    # the network still ran under the override: its output is logged beside the command
    assert np.isfinite(rows["policy_out"]).all()
    np.testing.assert_allclose(rows["chunk_row"][1], [0.1, 0.1])
    np.testing.assert_allclose(rows["edit_obs"][:, :4], np.tile(obs, (4, 1)))
    np.testing.assert_allclose(rows["t"], [0.0, DT, 2 * DT, 3 * DT])
    assert len(loop.transitions.drain()["t"]) == 0  # drained


def test_operator_estop_latches_and_reset_starts_an_episode(mlp_bundle):
    loop = _loop(mlp_bundle)
    loop.obs.write(np.zeros(4, np.float32), 0.0)
    loop.interventions.push(Intervention("override", 0.0, np.array([0.5, 0.5], np.float32)),
                            0.0)
    loop.interventions.push(Intervention("estop", 0.0), 0.0)
    np.testing.assert_allclose(loop.tick(0.0), [0.0, 0.0])
    assert loop.state == "estop" and loop.safety.estop_reason == "operator"
    loop.reset_estop()
    episode = loop.episode
    loop.reset()  # an episode boundary drops the override
    assert loop.episode == episode + 1 and not loop.interventions.active


def test_transition_log_is_bounded():
    log = TransitionLog(3, 1, capacity=4)
    for i in range(6):
        log.append(np.full(3, i), np.zeros(1), np.full(1, -i), np.zeros(1), np.full(1, i),
                   False, False, 0, i)
    rows = log.drain()
    assert rows["t"].tolist() == [2, 3, 4, 5] and log.dropped == 2
    assert rows["residual"][:, 0].tolist() == [-2, -3, -4, -5]
    with pytest.raises(ValueError, match="capacity must be >= 1"):
        TransitionLog(3, 1, capacity=0)
