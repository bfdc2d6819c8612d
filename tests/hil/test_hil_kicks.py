"""Kicks on the HIL plant's applied command: the sim's kick process, one env, parsed from
``--kicks``."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.hil.kicks import KickConfig, PlantKicks


def _torch():
    """The sim's kick process needs torch (not in the runtime-only install)."""
    return pytest.importorskip("torch")


def test_plant_kicks_are_the_sims_kicks_on_the_named_elements():
    torch = _torch()
    from edgerl.sim.wrappers.disturbance import Kicks

    cfg = KickConfig(rate=0.2, size=0.8, steps=3, dims=(1,), seed=7)
    plant = PlantKicks(cfg, n_cmd=2)
    sim = Kicks(0.2, 0.8, 3, torch.tensor([0.0, 1.0]), 1, 7)
    cmd = np.array([0.1, -0.2], np.float32)
    got = np.stack([plant.apply(cmd) for _ in range(200)])
    want, sim_starts = [], 0
    for _ in range(200):
        want.append(sim.apply(torch.as_tensor(cmd)[None])[0].numpy())
        sim_starts += int(sim.age[0] == 0)
    want = np.stack(want)
    np.testing.assert_array_equal(got, want)
    assert (got[:, 0] == np.float32(0.1)).all()  # element 0 is never kicked
    offsets = np.round(got[:, 1].astype(np.float64) + 0.2, 5)
    assert set(offsets) <= {0.0, 0.8, -0.8} and {0.8, -0.8} <= set(offsets)
    # each kick lasts 3 steps; rate 0.2 with no restart while one runs: ~200 / (3 + 5) kicks
    assert plant.started == sim_starts and 10 <= plant.started <= 45


def test_each_episode_meets_the_same_kicks_whatever_ran_before():
    _torch()
    cfg = KickConfig(rate=0.1, size=0.8, steps=3, dims=(0,), seed=5)
    a, b = PlantKicks(cfg, 1), PlantKicks(cfg, 1)
    zero = np.zeros(1, np.float32)
    for _ in range(37):  # a different history before episode 4
        a.apply(zero)
    a.start_episode(4)
    b.start_episode(4)
    got = [(a.apply(zero)[0], b.apply(zero)[0]) for _ in range(100)]
    assert all(x == y for x, y in got) and any(x != 0 for x, _ in got)
    b.start_episode(5)
    assert [b.apply(zero)[0] for _ in range(100)] != [x for x, _ in got]


def test_kick_spec_parse_and_errors():
    cfg = KickConfig.parse("rate=0.004,size=0.8,steps=6,dims=0+1,seed=3")
    assert cfg == KickConfig(0.004, 0.8, 6, (0, 1), 3)
    assert KickConfig.parse("").seed is None
    for text, msg in (("rate=0", "need 0 < rate <= 1"), ("size=-1", "size > 0"),
                      ("steps=0", "steps >= 1"), ("dims=a", "dims='a' is not element"),
                      ("gust=1", "'gust=1' is not KEY=VALUE with KEY one of rate, size"),
                      ("rate=x", "rate='x' is not a number")):
        with pytest.raises(ValueError, match=msg):
            KickConfig.parse(text)
    _torch()
    with pytest.raises(ValueError, match=r"dims \[2\] out of range for a command of 2"):
        PlantKicks(KickConfig(dims=(2,)), n_cmd=2)


def test_hil_cli_names_a_bad_kick_spec(capsys):
    _torch()  # `edgerl hil` runs a sim plant
    from edgerl.apps.cli import main

    assert main(["hil", "--kicks", "rate=2", "--episodes", "1"]) != 0
    assert "--kicks: kicks: need 0 < rate <= 1" in capsys.readouterr().err
