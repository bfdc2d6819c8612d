"""Kicks: masked, signed, last their steps, restart only when over; off returns the input."""

from __future__ import annotations

import torch

from edgerl.sim.wrappers.disturbance import Kicks


def test_kicks_at_rate_one_restart_as_soon_as_one_is_over():
    kicks = Kicks(rate=1.0, size=0.5, steps=2, mask=torch.tensor([1.0, 0.0]), n=3, seed=0)
    ages, outs = [], []
    for _ in range(6):
        outs.append(kicks.apply(torch.zeros(3, 2)))
        ages.append(kicks.age.tolist())
    out = torch.stack(outs)
    assert set(out[..., 0].abs().unique().tolist()) == {0.5}
    assert float(out[..., 1].abs().max()) == 0.0
    assert ages == [[0, 0, 0], [1, 1, 1]] * 3
    # one sign per kick: the two steps of a kick carry the same offset
    assert torch.equal(out[0], out[1]) and torch.equal(out[2], out[3])


def test_no_kicks_returns_the_command_untouched():
    cmd = torch.ones(2, 1)
    for kicks in (Kicks(0.0, 1.0, 3, torch.ones(1), 2, 0), Kicks(0.5, 0.0, 3, torch.ones(1), 2, 0)):
        assert not kicks.active and kicks.apply(cmd) is cmd
