"""EditLoop exploration noise (``EditLoop.explore``, ``edgerl hil --explore-std``): the noise
is in the command sent and in the logged ``command`` alike, only while the policy is in
control; off means bitwise the loop without it; bad values are refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.clock import VirtualClock
from edgerl.contract.intervention import Intervention
from edgerl.runtime.bundle import load_bundle
from edgerl.runtime.chunk_buffer import ChunkBuffer
from edgerl.runtime.edit_loop import EditLoop

DT = 0.01
N = 8


def _loop(bundle, sent: list):
    spec, net = load_bundle(bundle, warmup=1)
    loop = EditLoop(spec, net, ChunkBuffer(),
                    sink=lambda cmd, t: sent.append(cmd.copy()) or True,
                    clock=VirtualClock(0.0))
    loop.buffer.push(ActionChunk(actions=np.full((N + 2, 2), 0.1, np.float32), t0=0.0, dt=DT,
                                 obs_time=0.0))
    loop.log_transitions(capacity=64)
    return loop


def _run(loop, override_at: tuple[int, ...] = ()) -> dict:
    """N ticks over a fixed observation sequence; an override in force on ``override_at``."""
    obs = np.random.default_rng(3).normal(0.0, 0.3, (N, 4)).astype(np.float32)
    for k in range(N):
        t = k * DT
        loop.obs.write(obs[k], t)
        if k in override_at:
            loop.interventions.push(Intervention("override", t, np.array([0.3, -0.2],
                                                                         np.float32)), t)
        elif k - 1 in override_at:
            loop.interventions.push(Intervention("release", t), t)
        loop.tick(t)
    return loop.transitions.drain()


def test_noise_off_is_bitwise_the_plain_loop(mlp_bundle):
    plain_sent, off_sent, reset_sent = [], [], []
    plain = _run(_loop(mlp_bundle, plain_sent))
    off_loop = _loop(mlp_bundle, off_sent)
    off_loop.explore(0.0, seed=7)
    off = _run(off_loop)
    back = _loop(mlp_bundle, reset_sent)
    back.explore(0.5, seed=7)
    back.explore(0.0)  # turned off again
    again = _run(back)
    for rows in (off, again):
        for k in ("command", "policy_out", "residual", "edit_obs"):
            assert rows[k].tobytes() == plain[k].tobytes()
    # without noise the composed residual is the network's output
    assert plain["residual"].tobytes() == plain["policy_out"].tobytes()
    assert np.array_equal(off_sent, plain_sent) and np.array_equal(reset_sent, plain_sent)


def test_recorded_command_is_the_noisy_one_executed(mlp_bundle):
    plain = _run(_loop(mlp_bundle, []))
    sent: list = []
    loop = _loop(mlp_bundle, sent)
    std, bound = 0.4, loop.spec.residual_bound
    loop.explore(std, seed=11)
    rows = _run(loop, override_at=(3, 4))
    # what the sink got is what the log holds, tick for tick
    np.testing.assert_array_equal(np.asarray(sent), rows["command"])
    # the logged policy_out is the network's own output on the logged input (no noise)
    for x, y in zip(rows["edit_obs"], rows["policy_out"]):
        loop.backend.input[0] = x
        np.testing.assert_allclose(loop.backend.infer()[0], y, atol=1e-6)
    own = ~rows["intervened"]
    assert rows["intervened"].tolist() == [k in (3, 4) for k in range(N)]
    # one draw per policy tick (none under the override), composed before the bound
    noise = np.random.default_rng(11).standard_normal((int(own.sum()), 2), dtype=np.float32)
    expect = rows["chunk_row"][own] + bound * np.clip(
        rows["policy_out"][own] + np.float32(std) * noise, -1.0, 1.0)
    np.testing.assert_allclose(rows["command"][own], expect, atol=1e-6)
    # the logged residual is the noisy value before the bound (the learner's target);
    # under the override no noise is drawn and it is the network's output
    np.testing.assert_allclose(rows["residual"][own],
                               rows["policy_out"][own] + np.float32(std) * noise, atol=1e-6)
    assert np.abs(rows["residual"][own]).max() > 1.0  # some beyond the bound: unclipped
    np.testing.assert_array_equal(rows["residual"][~own], rows["policy_out"][~own])
    assert np.abs(rows["command"][own] - plain["command"][own]).max() > 0.01
    np.testing.assert_allclose(rows["command"][~own], np.tile([0.3, -0.2], (2, 1)), atol=1e-7)


@pytest.mark.parametrize("std", [-0.1, float("nan"), float("inf"), 11.0])
def test_bad_std_is_refused(mlp_bundle, std):
    loop = _loop(mlp_bundle, [])
    with pytest.raises(ValueError, match="exploration noise std must be a finite number"):
        loop.explore(std)


def test_cli_refuses_bad_explore_std(mlp_bundle, capsys):
    pytest.importorskip("tqdm")  # `edgerl hil` is a workstation verb (not in the runtime lock)
    from edgerl.apps.cli import main

    assert main(["hil", "--bundle", str(mlp_bundle), "--explore-std", "-1"]) != 0
    assert "--explore-std must be a finite number in 0..10, got -1.0" in capsys.readouterr().err
    assert main(["hil", "--explore-std", "0.2"]) != 0
    assert "--explore-std needs host-loop mode with an edit --bundle" in capsys.readouterr().err
