"""The partially weakened RLIF start (export/weaken_region.py): the re-fitted network keeps
the original output outside the region and corrupts it inside; region spec parsing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgerl.export.bundle_mlp import load_bundle_mlp
from edgerl.export.weaken_region import RegionSpec, region_mask, weaken_region
from tests.helpers.bundles import write_mlp_bundle


def _spec_names(spec):
    spec.observation.names = ["cart_x", "cart_vel", "pole_angle", "pole_vel"]
    return spec


def test_region_mask_is_falling_beyond_min_angle(tmp_path):
    _, spec = load_bundle_mlp(write_mlp_bundle(tmp_path / "b", hidden=(8,), obs_dim=4,
                                               action_dim=1))
    spec = _spec_names(spec)
    obs = np.zeros((4, spec.edit_obs.dim), np.float32)
    obs[:, 2:4] = [[0.2, 0.5], [0.2, -0.5], [-0.05, -0.5], [-0.2, -0.1]]
    assert region_mask(obs, spec, RegionSpec(min_angle=0.1)).tolist() == [True, False,
                                                                          False, True]


def test_weaken_region_flips_inside_and_keeps_outside(tmp_path):
    torch.manual_seed(0)
    actor, spec = load_bundle_mlp(write_mlp_bundle(tmp_path / "b", hidden=(32,), obs_dim=4,
                                                   action_dim=1))
    spec = _spec_names(spec)
    rng = np.random.default_rng(0)
    obs = rng.standard_normal((300, spec.edit_obs.dim)).astype(np.float32)
    region = RegionSpec(min_angle=0.5, mode="flip", steps=300, lr=1e-2, jitter=0.0)
    weak, stats = weaken_region(actor, spec, obs, region, seed=0)
    m = region_mask(obs, spec, region)
    with torch.no_grad():
        a, b = actor(torch.as_tensor(obs))[:, 0].numpy(), weak(torch.as_tensor(obs))[:, 0].numpy()
    big = np.abs(a) > 0.1
    assert 0.1 < stats["region_fraction"] < 0.5
    assert (np.sign(b[m & big]) != np.sign(a[m & big])).mean() > 0.8  # inside: flipped
    assert (np.sign(b[~m & big]) == np.sign(a[~m & big])).mean() > 0.9  # outside: kept
    assert stats["fit_err_outside"] < stats["base_abs_out"]


def test_region_spec_parse_and_errors(tmp_path):
    r = RegionSpec.parse("mode=zero,min_angle=0.1,steps=10")
    assert (r.mode, r.min_angle, r.steps) == ("zero", 0.1, 10)
    with pytest.raises(ValueError, match="mode 'bad' is not one of"):
        RegionSpec.parse("mode=bad")
    with pytest.raises(ValueError, match="'foo' is not KEY=VALUE"):
        RegionSpec.parse("foo")
    _, spec = load_bundle_mlp(write_mlp_bundle(tmp_path / "b", hidden=(8,), obs_dim=4,
                                               action_dim=1))
    with pytest.raises(ValueError, match="needs pole_angle and pole_vel"):
        region_mask(np.zeros((2, spec.edit_obs.dim)), spec, RegionSpec())


def test_export_like_holds_parity_relative_to_the_output_size(tmp_path):
    """A re-fitted network with large outputs (fp32 round-off above 1e-5 absolute) exports,
    its parity checked at 1e-5 times its largest output."""
    import json

    from edgerl.export.bundle_mlp import export_like

    actor, spec = load_bundle_mlp(write_mlp_bundle(tmp_path / "b", hidden=(8,), obs_dim=4,
                                                   action_dim=1))
    with torch.no_grad():
        actor.net[-1].weight.mul_(1e4)
    obs = np.random.default_rng(0).standard_normal((50, spec.edit_obs.dim)).astype(np.float32)
    export_like(actor, spec, tmp_path / "big", inputs=obs)
    out = json.loads((tmp_path / "big" / "parity.json").read_text())["parity"]["policy_onnx"]
    tol = out["outputs"][0]["tolerance"]
    assert out["ok"] and tol > 1e-5 and out["outputs"][0]["max_abs_err"] <= tol
