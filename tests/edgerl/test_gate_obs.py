"""The gate observation builder: layout, preview rows, numpy == torch, bad sizes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgerl.gate_obs import GATE_EXTRA_OBS, GATE_OBS_MEANING, GateObsConfig, build_gate_obs


def inputs():
    """Two envs: env 0 runs a 6-row plan of 8 padded rows at row 2 (age 5); env 1 none."""
    chunk = np.stack([np.stack([np.arange(8.0), 10 + np.arange(8.0)], -1)] * 2).astype(
        np.float32)
    fast = np.array([[0.5, -1.0], [2.0, 3.0]], np.float32)
    return (fast, chunk, np.array([2, 0]), np.array([6, 0]), np.array([5, 0]),
            np.array([True, False]), np.array([False, True]))


def test_layout_and_preview_rows():
    cfg = GateObsConfig(fast_dim=2, action_dim=2, age_scale=10.0, preview_steps=(0, 3, 4))
    assert cfg.dim == 2 + 4 + 3 * 2
    assert set(GATE_EXTRA_OBS) == set(GATE_OBS_MEANING)
    out = build_gate_obs(*inputs(), cfg)
    assert out.dtype == np.float32 and out.shape == (2, cfg.dim)
    # fast obs, age 5/10, rows left (6-2)/10, has, not in flight, rows 2 and 5, row 6 unplanned
    assert out[0].tolist() == pytest.approx([0.5, -1.0, 0.5, 0.4, 1.0, 0.0,
                                             2.0, 12.0, 5.0, 15.0, 0.0, 0.0])
    # no chunk: every chunk element is 0, in flight 1
    assert out[1].tolist() == [2.0, 3.0, 0.0, 0.0, 0.0, 1.0] + [0.0] * 6
    stale = build_gate_obs(*inputs(), GateObsConfig(2, 2, 10.0, stale_steps=1,
                                                   preview_steps=(4,)))
    assert stale[0, 6:].tolist() == [6.0, 16.0]  # row 6 is held one stale step


def test_numpy_and_torch_give_the_same_observation():
    cfg = GateObsConfig(fast_dim=2, action_dim=2, preview_steps=(1, 8))
    ref = build_gate_obs(*inputs(), cfg)
    got = build_gate_obs(*(torch.as_tensor(a) for a in inputs()), cfg)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32
    np.testing.assert_array_equal(got.numpy(), ref)
    one = build_gate_obs(*(a[0] for a in inputs()), cfg)  # a single sample (runtime)
    np.testing.assert_array_equal(one, ref[0])


def test_bad_sizes_are_clear_errors():
    with pytest.raises(ValueError, match="expects 3 and 2"):
        build_gate_obs(*inputs(), GateObsConfig(fast_dim=3, action_dim=2))
    with pytest.raises(ValueError, match="preview_steps must be >= 0"):
        GateObsConfig(2, 2, preview_steps=(-2,))
    with pytest.raises(ValueError, match="age_scale"):
        GateObsConfig(2, 2, age_scale=0.0)
