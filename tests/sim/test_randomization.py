"""Domain randomization: per-env draws at reset, ranges, determinism, validation."""

from __future__ import annotations

import pytest
import torch

from edgerl.sim.randomization import DomainRandConfig, DomainRandomizer


def test_draws_stay_in_range_per_env_and_only_for_reset_ids():
    cfg = DomainRandConfig(mass_scale=(0.5, 1.5), actuator_gain=(0.9, 1.0), latency_steps=(1, 2))
    r = DomainRandomizer(cfg, 100, "cpu")
    r.resample(torch.arange(50), torch.Generator().manual_seed(0))
    assert ((r.mass_scale[:50] >= 0.5) & (r.mass_scale[:50] <= 1.5)).all()
    assert r.mass_scale[:50].std() > 0.2
    assert (r.mass_scale[50:] == 1.0).all() and (r.latency_steps[50:] == 0).all()
    assert set(r.latency_steps[:50].tolist()) == {1, 2}
    assert (r.friction_scale == 1.0).all()  # degenerate range (1, 1)


def test_same_generator_seed_same_draws_and_disabled_draws_nothing():
    cfg = DomainRandConfig(damping_scale=(0.0, 2.0))
    a, b = DomainRandomizer(cfg, 8, "cpu"), DomainRandomizer(cfg, 8, "cpu")
    a.resample(torch.arange(8), torch.Generator().manual_seed(4))
    b.resample(torch.arange(8), torch.Generator().manual_seed(4))
    assert torch.equal(a.damping_scale, b.damping_scale)
    gen = torch.Generator().manual_seed(4)
    state = gen.get_state()
    off = DomainRandomizer(DomainRandConfig(), 8, "cpu")
    assert not off.cfg.enabled
    off.resample(torch.arange(8), gen)
    assert torch.equal(gen.get_state(), state)


@pytest.mark.parametrize("kwargs, match", [
    ({"mass_scale": (1.2, 1.0)}, "mass_scale"),
    ({"friction_scale": (-0.1, 1.0)}, "friction_scale"),
    ({"latency_steps": (0, 1.5)}, "latency_steps"),
    ({"damping_scale": (1.0,)}, "damping_scale"),
])
def test_bad_ranges_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DomainRandConfig(**kwargs)
