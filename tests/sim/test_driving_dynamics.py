"""Driving world: the bicycle models' tyre grip, the road geometry, config validation."""

from __future__ import annotations

import math

import pytest
import torch

from edgerl.sim.tasks.driving_dynamics import (
    DrivingCfg,
    Road,
    VehicleState,
    bicycle_step,
    wrap_angle,
)


def test_ice_breaks_tyre_grip_only_in_the_dynamic_model():
    """Same steering at speed: on ice the dynamic car under-steers (slides), kinematic does not."""
    z = torch.zeros(1, 1)
    yaw_rate = {}
    for model in ("dynamic", "kinematic"):
        cfg = DrivingCfg(model=model)
        for surface, mu in (("dry", 1.0), ("ice", 0.15)):
            s = VehicleState(z, z.clone(), z.clone(), z + 20.0, z.clone(), z.clone())
            for _ in range(20):
                s = bicycle_step(s, z, z + 0.1, torch.full((1, 1), mu), cfg)
            yaw_rate[model, surface] = s.r.item()
    assert yaw_rate["kinematic", "ice"] == pytest.approx(yaw_rate["kinematic", "dry"])
    assert yaw_rate["dynamic", "ice"] < 0.5 * yaw_rate["dynamic", "dry"]
    assert yaw_rate["dynamic", "dry"] == pytest.approx(yaw_rate["kinematic", "dry"], rel=0.35)


def test_road_heading_and_curvature_follow_the_sinusoid():
    road = Road(DrivingCfg(road_amp=2.0, road_wavelength=40.0))
    k = 2.0 * math.pi / 40.0
    x = torch.tensor([0.0, 10.0, 20.0])
    torch.testing.assert_close(road.y(x), 2.0 * torch.sin(k * x))
    assert road.heading(x)[0].item() == pytest.approx(math.atan(2.0 * k))
    assert road.curvature(x)[1].item() == pytest.approx(-2.0 * k * k, rel=1e-5)  # crest


def test_straights_road_is_flat_at_crossings_and_sharp_at_crests():
    road = Road(DrivingCfg(road_amp=2.0, road_wavelength=40.0, road_shape="straights"))
    k = 2.0 * math.pi / 40.0
    x = torch.linspace(0.0, 40.0, 81, dtype=torch.float64)
    torch.testing.assert_close(road.y(x), 2.0 * torch.sin(k * x) ** 3)
    h = 1e-4
    torch.testing.assert_close(road.slope(x), (road.y(x + h) - road.y(x - h)) / (2 * h))
    d2 = (road.y(x + h) - 2 * road.y(x) + road.y(x - h)) / h**2
    torch.testing.assert_close(road.curvature(x), d2 / (1 + road.slope(x) ** 2) ** 1.5,
                               atol=1e-4, rtol=1e-3)
    assert road.curvature(torch.tensor([10.0])).item() == pytest.approx(-3 * 2.0 * k * k)
    assert road.max_curvature == pytest.approx(3 * 2.0 * k * k)
    assert road.curvature(torch.tensor([0.0])).item() == 0.0 and road.slope(x)[0] == 0.0
    with pytest.raises(ValueError, match="road_shape"):
        DrivingCfg(road_shape="zigzag")


def test_chicanes_road_alternates_calm_stretches_and_sharp_swerves():
    cfg = DrivingCfg(road_amp=3.5, road_wavelength=75.0, road_shape="chicanes",
                     road_sharpness=3.0)
    road = Road(cfg)
    k, c = 2.0 * math.pi / 75.0, 3.0
    x = torch.linspace(0.0, 150.0, 1501, dtype=torch.float64)
    torch.testing.assert_close(road.y(x), 3.5 * torch.exp(-c * (1 + torch.cos(k * x))))
    h = 1e-4
    torch.testing.assert_close(road.slope(x), (road.y(x + h) - road.y(x - h)) / (2 * h))
    d2 = (road.y(x + h) - 2 * road.y(x) + road.y(x - h)) / h**2
    torch.testing.assert_close(road.curvature(x), d2 / (1 + road.slope(x) ** 2) ** 1.5,
                               atol=1e-4, rtol=1e-3)
    kappa = road.curvature(x).abs()
    apex = road.curvature(torch.tensor([37.5, 112.5], dtype=torch.float64))
    assert apex.tolist() == pytest.approx([-3.5 * c * k * k] * 2)
    assert float(kappa.max()) == pytest.approx(road.max_curvature) == pytest.approx(0.0737, 1e-3)
    # calm (|kappa| < 0.01 1/m) at the start, between the swerves and at the end; sharp at both
    # apexes: the profile alternates calm -> sharp -> calm -> sharp -> calm along 150 m
    sharp = (kappa > 0.01).int()
    runs = [int(v) for v in torch.unique_consecutive(sharp)]
    assert runs[0] == 0 and runs[-1] == 0
    assert 0.3 < float((kappa < 0.01).double().mean()) < 0.7
    for lo, hi in ((0.0, 10.0), (65.0, 85.0), (140.0, 150.0)):
        assert float(kappa[(x >= lo) & (x <= hi)].max()) < 0.01
    with pytest.raises(ValueError, match="road_sharpness"):
        DrivingCfg(road_shape="chicanes", road_sharpness=0.0)


def test_wrap_angle_maps_into_minus_pi_pi():
    wrapped = wrap_angle(torch.tensor([0.5, 2.25 * math.pi, -3.5 * math.pi]))
    torch.testing.assert_close(wrapped, torch.tensor([0.5, 0.25 * math.pi, 0.5 * math.pi]))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"model": "rocket"}, "kinematic"), ({"surface": "lava"}, "surface"),
    ({"n_agents": 0}, "n_agents")])
def test_bad_config_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DrivingCfg(**kwargs)
