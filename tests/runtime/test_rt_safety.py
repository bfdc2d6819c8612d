"""SafetyFilter: each intervention, with exact numbers and counters."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.contract.spec import ActionSpec
from edgerl.runtime.safety import SafetyConfig, SafetyFilter


def spec(max_rate=None):
    return ActionSpec(names=["a", "b"], units=["rad", "rad"], low=[-1.0, 0.5], high=[1.0, 2.0],
                      max_rate=max_rate or [])


def run(f, action, dt=0.01):
    out = np.zeros(2, np.float32)
    f.filter(np.asarray(action, np.float32), dt, out)
    return out


def test_clip_to_limits_counted():
    f = SafetyFilter(spec())
    np.testing.assert_allclose(f.safe, [0.0, 0.5])  # zeros clipped into the limits
    np.testing.assert_allclose(run(f, [3.0, 0.0]), [1.0, 0.5])
    np.testing.assert_allclose(run(f, [0.2, 1.0]), [0.2, 1.0])
    assert f.interventions()["clip"] == 1


def test_rate_limit_exact():
    f = SafetyFilter(spec(max_rate=[10.0, 0.0]))  # 10 units/s on a, b unlimited
    out = run(f, [1.0, 2.0], dt=0.01)  # from safe [0, .5]: a may move 0.1
    np.testing.assert_allclose(out, [0.1, 2.0], rtol=1e-6)
    out = run(f, [-1.0, 1.0], dt=0.02)
    np.testing.assert_allclose(out, [-0.1, 1.0], rtol=1e-6)
    assert f.interventions()["rate_limit"] == 2


def test_nonfinite_action_holds_last_command():
    f = SafetyFilter(spec())
    run(f, [0.3, 1.5])
    out = run(f, [np.nan, 1.0])
    np.testing.assert_allclose(out, [0.3, 1.5])
    assert f.interventions()["nonfinite_action"] == 1


def test_decelerate_first_order_and_zero():
    f = SafetyFilter(spec(), SafetyConfig(decel_tau_s=0.1))
    run(f, [1.0, 2.0])
    out = np.zeros(2, np.float32)
    f.fallback("decelerate", 0.05, out, reason="stale_chunk")  # half-way to safe
    np.testing.assert_allclose(out, [0.5, 1.25], rtol=1e-6)
    f.fallback("decelerate", 0.05, out, reason="stale_chunk")
    np.testing.assert_allclose(out, [0.25, 0.875], rtol=1e-6)
    f.fallback("zero", 0.05, out, reason="no_chunk")
    np.testing.assert_allclose(out, f.safe)
    assert f.interventions()["stale_chunk"] == 2 and f.interventions()["no_chunk"] == 1


def test_estop_latches_until_reset():
    f = SafetyFilter(spec())
    f.estop("operator")
    for _ in range(3):
        np.testing.assert_allclose(run(f, [0.9, 1.9]), f.safe)
    assert f.interventions()["estop"] == 3 and f.estop_reason == "operator"
    f.reset_estop()
    np.testing.assert_allclose(run(f, [0.9, 1.9]), [0.9, 1.9])


def test_consecutive_overruns_latch_estop():
    f = SafetyFilter(spec(), SafetyConfig(max_consecutive_overruns=3))
    for overrun in (True, True, False, True, True):
        f.note_overrun(overrun)
    assert not f.estopped
    f.note_overrun(True)
    assert f.estopped and "3 deadline overruns" in f.estop_reason
    assert f.interventions()["deadline_overrun"] == 5


def test_consecutive_nonfinite_latch_estop():
    f = SafetyFilter(spec(), SafetyConfig(max_consecutive_nonfinite=2))
    run(f, [np.inf, 1.0])
    assert not f.estopped
    run(f, [np.nan, 1.0])
    assert f.estopped


def test_config_validation():
    with pytest.raises(ValueError, match="stale_policy: 'brake' is not one of"):
        SafetyConfig(stale_policy="brake")
    with pytest.raises(ValueError, match="safe_action: must lie inside"):
        SafetyFilter(spec(), SafetyConfig(safe_action=[0.0, 0.0]))
    with pytest.raises(ValueError, match="needs 2 elements"):
        SafetyFilter(spec(), SafetyConfig(safe_action=[0.0]))
