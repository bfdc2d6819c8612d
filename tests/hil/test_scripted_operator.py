"""The scripted suboptimal operator: takes over on a failing state (detuned, noisy), not on a
healthy one; holds, releases; deterministic for a seed; its spec string."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.hil.operator import Flaws, OperatorConfig, ScriptedOperator, Takeover

GAIN = np.array([-1.0, -1.5, -20.0, -3.0])  # a = -K s: pushes the cart under the pole


def test_healthy_state_no_intervention_failing_state_takes_over():
    op = ScriptedOperator(GAIN, OperatorConfig(Takeover(hold_steps=3), noise=0.0,
                                               gain_scale=0.5))
    healthy = np.array([0.2, 0.1, 0.05, 0.0])
    assert all(op.step(healthy, 0.01 * k) is None for k in range(20))
    falling = np.array([0.0, 0.0, 0.3, 0.5])  # pole 0.3 rad > 0.2 trigger
    iv = op.step(falling, 1.0)
    assert iv.kind == "override" and iv.stamp_s == 1.0
    expected = np.clip(-0.5 * falling @ GAIN, -1, 1)  # detuned: half the expert's gain
    assert iv.command.tolist() == pytest.approx([expected])
    # holds for hold_steps even once safe, then releases once
    kinds = [getattr(op.step(healthy, 1.0 + 0.02 * k), "kind", None) for k in range(1, 5)]
    assert kinds == ["override", "override", "release", None] and op.takeovers == 1


def test_cart_near_the_edge_triggers_and_noise_is_seeded():
    cfg = OperatorConfig(noise=0.3, seed=5)
    edge = np.array([1.6, -0.5, 0.0, 0.0])  # x beyond the 1.5 m trigger
    a = [ScriptedOperator(GAIN, cfg).step(edge, 0.0).command[0] for _ in range(2)]
    b = ScriptedOperator(GAIN, OperatorConfig(noise=0.3, seed=6)).step(edge, 0.0).command[0]
    assert a[0] == a[1] != b  # same seed, same command; another seed, another command
    assert ScriptedOperator(GAIN, OperatorConfig(Takeover(x_trigger=2.0))).step(edge, 0.0) is None


def test_operator_spec_parse_and_errors():
    cfg = OperatorConfig.parse("theta=0.1, hold=4,gain=0.8,noise=0,seed=2")
    assert (cfg.takeover.theta_trigger, cfg.takeover.hold_steps, cfg.gain_scale, cfg.noise,
            cfg.seed) == (0.1, 4, 0.8, 0.0, 2)
    assert OperatorConfig.parse("") == OperatorConfig()
    with pytest.raises(ValueError, match="'speed=1' is not KEY=VALUE"):
        OperatorConfig.parse("speed=1")
    with pytest.raises(ValueError, match="hold='x' is not a number"):
        OperatorConfig.parse("hold=x")
    with pytest.raises(ValueError, match="hold_steps must be >= 1"):
        OperatorConfig.parse("hold=0")


def test_bias_is_added_to_the_correction_before_the_clip():
    op = ScriptedOperator(GAIN, OperatorConfig(noise=0.0, gain_scale=0.5, flaws=Flaws(bias=0.3)))
    s = np.array([0.0, 0.0, 0.01, 0.0])  # correction -0.5 * s @ GAIN = 0.1
    assert op.command(s) == pytest.approx(0.4)
    assert op.command(np.zeros(4)) == pytest.approx(0.3)  # upright: still pushes the cart
    assert op.command(np.array([0.0, 0.0, 0.3, 0.0])) == 1.0  # 3.0 + 0.3 clipped
    iv = op.step(np.array([0.0, 0.0, 0.25, 0.0]), 0.0)  # the override carries the command
    assert iv.command.tolist() == pytest.approx([1.0])


def test_bangbang_commands_full_scale_by_the_sign_of_the_correction():
    op = ScriptedOperator(GAIN, OperatorConfig(noise=0.0, gain_scale=0.5,
                                               flaws=Flaws(bangbang=True)))
    assert op.command(np.array([0.0, 0.0, 0.01, 0.0])) == 1.0  # correction 0.1 -> +1
    assert op.command(np.array([0.0, 0.0, -0.01, 0.0])) == -1.0
    biased = ScriptedOperator(GAIN, OperatorConfig(noise=0.0, gain_scale=0.5,
                                                   flaws=Flaws(bias=-0.3, bangbang=True)))
    assert biased.command(np.array([0.0, 0.0, 0.01, 0.0])) == -1.0  # sign(0.1 - 0.3)


def test_bias_bangbang_spec_parse_and_errors():
    cfg = OperatorConfig.parse("bias=-0.25,bangbang=1")
    assert (cfg.flaws.bias, cfg.flaws.bangbang) == (-0.25, True)
    assert OperatorConfig.parse("bangbang=0").flaws.bangbang is False
    with pytest.raises(ValueError, match="bangbang='2' must be 0 or 1"):
        OperatorConfig.parse("bangbang=2")
    with pytest.raises(ValueError, match="bias='up' is not a number"):
        OperatorConfig.parse("bias=up")


def test_flip_pushes_the_wrong_way_for_the_first_steps_of_each_takeover():
    op = ScriptedOperator(GAIN, OperatorConfig(Takeover(hold_steps=3), noise=0.0, gain_scale=0.5,
                                               flaws=Flaws(flip=2)))
    falling = np.array([0.0, 0.0, 0.3, 0.5])
    good = float(np.clip(-0.5 * falling @ GAIN, -1, 1))
    cmds = [op.step(falling, 0.02 * k).command[0] for k in range(6)]  # one extended takeover
    assert cmds == pytest.approx([-good, -good, good, good, good, good])
    assert op.step(np.zeros(4), 0.2).kind == "release"
    assert op.step(falling, 0.3).command[0] == pytest.approx(-good)  # a new takeover: again
    assert op.takeovers == 2
    assert OperatorConfig.parse("flip=3").flaws.flip == 3
    with pytest.raises(ValueError, match="flip must be in"):
        OperatorConfig(Takeover(hold_steps=4), flaws=Flaws(flip=5))
