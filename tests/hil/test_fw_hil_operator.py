"""The HIL operator channel end to end: the scripted operator takes over the host loop of a
bundle that cannot balance, and ``--record`` writes the ticks and its records to MCAP."""

from __future__ import annotations

import pytest

from edgerl.contract.intervention_log import control_steps, read_recording
from edgerl.hil.harness import HilConfig, run_hil
from edgerl.hil.operator import OperatorConfig, Takeover

pytestmark = [pytest.mark.hil, pytest.mark.slow]


def test_operator_takes_over_and_the_recording_shows_it(fw_binaries, tmp_path):
    from tests.helpers.bundles import write_mlp_bundle

    bundle = write_mlp_bundle(tmp_path / "b", hidden=(8,), obs_dim=4, action_dim=1,
                              control_hz=50.0, horizon=10, period_s=0.1, residual_bound=0.05)
    rec = tmp_path / "iv.mcap"
    # a hair trigger: the operator takes over at once and holds for 5 steps at a time
    res = run_hil(HilConfig(bundle=bundle, task="cartpole", max_steps=40, check_estop=False,
                            link_probe=0, operator=OperatorConfig(Takeover(
                                theta_trigger=1e-4, x_trigger=1e-4, hold_steps=5)),
                            record=rec)).as_dict()
    assert res["operator_takeovers"] >= 1 and res["operator_records"]["override"] >= 5
    assert res["recorded_ticks"] > 0 and res["dropped_ticks"] == 0
    ticks, ivs = read_recording(rec)
    assert len(ticks["t"]) == res["recorded_ticks"]
    assert [iv.kind for iv in ivs].count("override") == res["operator_records"]["override"]
    steps = control_steps(ticks, fast_dim=4)
    assert steps["start"].sum() >= 1 and steps["intervened"].mean() > 0.5
    # during a takeover the executed command is the operator's, not the policy's composition
    commands = {round(float(iv.command[0]), 5) for iv in ivs if iv.kind == "override"}
    executed = {round(float(c), 5) for c in ticks["command"][ticks["intervened"], 0]}
    assert executed <= commands | {1.0, -1.0}


def test_operator_needs_a_host_loop_bundle():
    with pytest.raises(ValueError, match="needs host-loop mode with a --bundle"):
        run_hil(HilConfig(operator=OperatorConfig()))


def test_explore_noise_is_in_the_recorded_commands(fw_binaries, tmp_path):
    """``explore_std``: every recorded policy tick executed ``chunk_row + bound * clip(
    policy_out + std * n)`` with ``n`` the seed's draws in order (one per policy tick)."""
    import numpy as np

    from tests.helpers.bundles import write_mlp_bundle

    bundle = write_mlp_bundle(tmp_path / "b", hidden=(8,), obs_dim=4, action_dim=1,
                              control_hz=50.0, horizon=10, period_s=0.1, residual_bound=0.05)
    rec = tmp_path / "iv.mcap"
    res = run_hil(HilConfig(bundle=bundle, task="cartpole", max_steps=30, check_estop=False,
                            link_probe=0, record=rec, explore_std=0.5,
                            explore_seed=4)).as_dict()
    assert res["explore_std"] == 0.5 and res["explore_seed"] == 4
    ticks, _ = read_recording(rec)
    assert len(ticks["t"]) >= 20 and not ticks["intervened"].any()
    n = np.random.default_rng(4).standard_normal((len(ticks["t"]), 1), dtype=np.float32)
    noisy = ticks["chunk_row"] + 0.05 * np.clip(ticks["policy_out"] + np.float32(0.5) * n,
                                                -1, 1)
    np.testing.assert_allclose(ticks["command"], np.clip(noisy, -1, 1), atol=1e-6)
    plain = ticks["chunk_row"] + 0.05 * np.clip(ticks["policy_out"], -1, 1)
    assert np.abs(ticks["command"] - plain).max() > 0.01
