"""The gate observation's plan preview: layout, rows ahead, numpy == torch, bad specs."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.contract.gate_obs import (
    GATE_EXTRA_OBS,
    GATE_OBS_MEANING,
    GATE_PREVIEW_OBS,
    GateBudgetSpec,
    GateSpec,
    build_gate_obs,
)
from edgerl.contract.serde import SchemaError


def spec(preview=(0, 3, 4), stale=0, action_dim=2, **kw):
    return GateSpec(budgets=[GateBudgetSpec("keep", keep=True)], decision_steps=1,
                    fast_indices=[0, 1], age_scale=10.0, stale_steps=stale,
                    preview_steps=list(preview), action_dim=action_dim, **kw)


def inputs():
    """Two envs: env 0 runs a 6-row plan (8 padded rows) at row 2, age 5; env 1 has none."""
    robot = np.array([[0.5, -1.0, 9.0], [2.0, 3.0, 9.0]], np.float32)
    return (robot, np.array([5, 0]), np.array([2, 0]), np.array([6, 0]),
            np.array([False, True]))


def test_layout_and_preview_rows():
    s = spec()
    assert s.extra == [*GATE_EXTRA_OBS, GATE_PREVIEW_OBS] and s.dim == 2 + 4 + 3 * 2
    assert set(s.extra) == set(GATE_OBS_MEANING)
    out = build_gate_obs(*inputs(), s, chunk=inputs_chunk())
    assert out.dtype == np.float32 and out.shape == (2, s.dim)
    # fast obs, age 5/10, rows left (6-2)/10, has, not in flight, rows 2 and 5, row 6 unplanned
    assert out[0].tolist() == pytest.approx([0.5, -1.0, 0.5, 0.4, 1.0, 0.0,
                                             2.0, 12.0, 5.0, 15.0, 0.0, 0.0])
    assert out[1].tolist() == [2.0, 3.0, 0.0, 0.0, 0.0, 1.0] + [0.0] * 6  # no plan
    stale = build_gate_obs(*inputs(), spec(preview=(4,), stale=1), chunk=inputs_chunk())
    assert stale[0, 6:].tolist() == [6.0, 16.0]  # row 6 is held one stale step
    base = build_gate_obs(*inputs(), spec(preview=(), action_dim=0))
    assert base.shape == (2, 6)  # no preview: the base observation


def inputs_chunk():
    """Both envs' chunks: row i = (i, 10 + i)."""
    return np.stack([np.stack([np.arange(8.0), 10 + np.arange(8.0)], -1)] * 2).astype(
        np.float32)


def test_numpy_and_torch_give_the_same_observation():
    torch = pytest.importorskip("torch", reason="training side only (no torch on the runtime)")
    s = spec(preview=(1, 8))
    ref = build_gate_obs(*inputs(), s, chunk=inputs_chunk())
    got = build_gate_obs(*(torch.as_tensor(a) for a in inputs()), s,
                         chunk=torch.as_tensor(inputs_chunk()))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy(), ref)
    one = build_gate_obs(*(a[0] for a in inputs()), s, chunk=inputs_chunk()[0])  # runtime
    np.testing.assert_array_equal(one, ref[0])


def test_bad_preview_specs_are_clear_errors():
    with pytest.raises(ValueError, match="need the plan's rows"):
        build_gate_obs(*inputs(), spec())
    with pytest.raises(SchemaError, match="preview_steps: must be >= 0"):
        spec(preview=(-2,))
    with pytest.raises(SchemaError, match="action_dim"):
        spec(action_dim=0)
    with pytest.raises(SchemaError, match="gate.extra"):
        spec(extra=list(GATE_EXTRA_OBS)[:3])


def test_budget_gain_outside_zero_one_is_refused():
    assert GateBudgetSpec("small", horizon=4, gain=0.5).gain == 0.5
    with pytest.raises(SchemaError, match=r"gate.budgets\[small\]: .*gain in \[0, 1\]"):
        GateBudgetSpec("small", horizon=4, gain=1.5)
