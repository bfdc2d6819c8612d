"""The driving task's world: its config, the road and the vehicle models (torch, SI units).

The road's centerline is a sine, a cubed sine or chicanes (:class:`Road`); every vehicle
state is a ``(num_envs, n_agents)`` tensor (:class:`VehicleState`) advanced by the pure
:func:`bicycle_step`.

Vehicle models (``DrivingCfg.model``, so transfer between them can be measured):

* ``"kinematic"``: kinematic bicycle (no tyre slip); the surface friction only limits the
  longitudinal acceleration to ``mu * g``.
* ``"dynamic"``: dynamic bicycle with lateral velocity and yaw rate; front/rear lateral tyre
  forces ``F = mu Fz tanh(C alpha / (mu Fz))`` saturate at the friction limit, so a car that
  corners too fast on ice slides out of its lane.

Road surface friction ``mu``: ``dry`` 1.0, ``wet`` 0.6, ``ice`` 0.15, or ``mixed`` (one drawn
per env at reset), times the randomizer's ``friction_scale``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from edgerl.sim.randomization import DomainRandConfig

__all__ = ["GRAVITY", "ROAD_SHAPES", "SURFACE_MU", "DrivingCfg", "Road", "VehicleState",
           "bicycle_step",
           "wrap_angle"]

#: Centerline shapes (:class:`Road`).
ROAD_SHAPES = ("sine", "straights", "chicanes")
SURFACE_MU = {"dry": 1.0, "wet": 0.6, "ice": 0.15}
GRAVITY = 9.81


@dataclass
class DrivingCfg:
    """Road, vehicles and episode (SI units).

    Attributes:
        control_hz / substeps: Policy rate and integration steps per control step.
        max_episode_steps: Time-out (control steps). goal_distance: m to drive for success.
        n_agents: Vehicles per world (agent 0 = ego). n_lanes / lane_width (m).
        road_amp / road_wavelength: Centerline sinusoid (m).
        road_shape: ``"sine"`` (``y = A sin(k x)``, curved almost everywhere) or
            ``"straights"`` (``y = A sin^3(k x)``: near-straight stretches around the zero
            crossings and curves 3x sharper at the crests) or ``"chicanes"`` (``y = A
            exp(-c (1 + cos(k x)))``, ``c`` = ``road_sharpness``: straight road with one
            lateral swerve of ``A`` per wavelength, at ``x = wavelength / 2 + n wavelength``,
            about ``2 / (k sqrt(c))`` m wide each side).
        road_sharpness: ``c`` of the ``"chicanes"`` road (> 0; peak curvature ``A c k^2``).
        model: ``"kinematic"`` or ``"dynamic"``. surface: dry / wet / ice / mixed.
        cruise_speed: Ego target speed (m/s); others cruise at U(other_speed) x cruise_speed.
        accel_max (m/s^2) / steer_max (rad): Action scales.
        mass (kg), yaw_inertia (kg m^2), l_front / l_rear (m, CG to axle), corner_stiffness
            (N/rad, per axle), length / width (m, collision box).
        randomization: Per-env mass / friction / actuator gain at reset (mass scales inertia).
    """

    control_hz: float = 20.0
    substeps: int = 2
    max_episode_steps: int = 400
    goal_distance: float = 150.0
    n_agents: int = 4
    n_lanes: int = 3
    lane_width: float = 3.5
    road_amp: float = 4.0
    road_wavelength: float = 120.0
    road_shape: str = "sine"
    road_sharpness: float = 5.0
    model: str = "dynamic"
    surface: str = "dry"
    cruise_speed: float = 15.0
    other_speed: tuple[float, float] = (0.6, 1.0)
    accel_max: float = 6.0
    steer_max: float = 0.5
    mass: float = 1500.0
    yaw_inertia: float = 2500.0
    l_front: float = 1.2
    l_rear: float = 1.4
    corner_stiffness: float = 80000.0
    length: float = 4.5
    width: float = 1.8
    randomization: DomainRandConfig = field(default_factory=DomainRandConfig)

    def __post_init__(self) -> None:
        if self.model not in ("kinematic", "dynamic"):
            raise ValueError(f"driving.model must be 'kinematic' or 'dynamic', got {self.model!r}")
        if self.surface not in (*SURFACE_MU, "mixed"):
            raise ValueError(f"driving.surface must be one of {', '.join(SURFACE_MU)} or "
                             f"'mixed', got {self.surface!r}")
        if self.road_shape not in ROAD_SHAPES:
            raise ValueError(f"driving.road_shape must be one of {', '.join(ROAD_SHAPES)}, got "
                             f"{self.road_shape!r}")
        if self.road_sharpness <= 0:
            raise ValueError(f"driving.road_sharpness must be > 0, got {self.road_sharpness}")
        if self.n_agents < 1 or self.n_lanes < 1 or self.substeps < 1:
            raise ValueError("driving: n_agents, n_lanes and substeps must be >= 1")
        self.randomization = DomainRandConfig.coerce(self.randomization)
        self.other_speed = tuple(self.other_speed)


class Road:
    """Centerline ``y = A sin(k x)`` (``"sine"``), ``y = A sin^3(k x)`` (``"straights"``) or
    ``y = A exp(-c (1 + cos(k x)))`` (``"chicanes"``) and its slope / heading / curvature
    (elementwise on tensors)."""

    def __init__(self, cfg: DrivingCfg) -> None:
        self.amp = cfg.road_amp
        self.k = 2.0 * math.pi / cfg.road_wavelength
        self.shape = cfg.road_shape
        self.sharpness = cfg.road_sharpness
        #: Largest curvature (1/m): at the crests (sine, straights), at the swerve's apex
        #: (chicanes; the flanks are below it for c >= 1).
        gain = {"sine": 1.0, "straights": 3.0, "chicanes": self.sharpness}[self.shape]
        self.max_curvature = gain * abs(self.amp) * self.k ** 2

    def _bump(self, x: torch.Tensor) -> torch.Tensor:
        """``exp(-c (1 + cos(k x)))`` of the chicanes road."""
        return torch.exp(-self.sharpness * (1.0 + torch.cos(self.k * x)))

    def y(self, x: torch.Tensor) -> torch.Tensor:
        if self.shape == "straights":
            return self.amp * torch.sin(self.k * x) ** 3
        if self.shape == "chicanes":
            return self.amp * self._bump(x)
        return self.amp * torch.sin(self.k * x)

    def slope(self, x: torch.Tensor) -> torch.Tensor:
        """dy/dx."""
        sin = torch.sin(self.k * x)
        if self.shape == "straights":
            return (3.0 * self.amp * self.k) * sin * sin * torch.cos(self.k * x)
        if self.shape == "chicanes":
            return (self.amp * self.sharpness * self.k) * sin * self._bump(x)
        return self.amp * self.k * torch.cos(self.k * x)

    def heading(self, x: torch.Tensor) -> torch.Tensor:
        return torch.atan(self.slope(x))

    def curvature(self, x: torch.Tensor) -> torch.Tensor:
        slope = self.slope(x)
        sin, cos = torch.sin(self.k * x), torch.cos(self.k * x)
        if self.shape == "straights":
            d2 = (3.0 * self.amp * self.k * self.k) * sin * (2.0 * cos * cos - sin * sin)
        elif self.shape == "chicanes":
            c = self.sharpness
            d2 = (self.amp * c * self.k * self.k) * self._bump(x) * (cos + c * sin * sin)
        else:
            d2 = -self.amp * self.k * self.k * sin
        return d2 / (1.0 + slope * slope) ** 1.5


def wrap_angle(angle: torch.Tensor) -> torch.Tensor:
    """Angle to [-pi, pi] (round-based: cheaper than ``remainder`` on CPU)."""
    return angle - (2.0 * math.pi) * torch.round(angle * (0.5 / math.pi))


@dataclass
class VehicleState:
    """Per-vehicle state tensors, each (num_envs, n_agents): position x, y (m), yaw (rad),
    body-frame velocities vx, vy (m/s), yaw rate r (rad/s)."""

    x: torch.Tensor
    y: torch.Tensor
    yaw: torch.Tensor
    vx: torch.Tensor
    vy: torch.Tensor
    r: torch.Tensor

    def as_tensor(self) -> torch.Tensor:
        return torch.stack((self.x, self.y, self.yaw, self.vx, self.vy, self.r), dim=-1)


def bicycle_step(s: VehicleState, accel: torch.Tensor, steer: torch.Tensor, mu: torch.Tensor,
                 cfg: DrivingCfg, mass_scale: torch.Tensor | float = 1.0) -> VehicleState:
    """One control step of every vehicle; ``accel`` (m/s^2), ``steer`` (rad), ``mu`` broadcast
    to (num_envs, n_agents). Pure function (used by step, the expert rollout, the benchmark)."""
    h = 1.0 / (cfg.control_hz * cfg.substeps)
    lf, lr = cfg.l_front, cfg.l_rear
    a = torch.maximum(torch.minimum(accel, mu * GRAVITY), -mu * GRAVITY)
    x, y, yaw, vx, vy, r = s.x, s.y, s.yaw, s.vx, s.vy, s.r
    if cfg.model == "kinematic":
        beta = torch.atan(lr / (lf + lr) * torch.tan(steer))
        for _ in range(cfg.substeps):
            vx = (vx + h * a).clamp_min(0.0)
            heading = yaw + beta
            x = x + h * vx * torch.cos(heading)
            y = y + h * vx * torch.sin(heading)
            r = vx / lr * torch.sin(beta)
            yaw = yaw + h * r
        vy = vx * torch.sin(beta)
        return VehicleState(x, y, yaw, vx, vy, r)
    m = cfg.mass * mass_scale
    iz = cfg.yaw_inertia * mass_scale
    fz_f = m * GRAVITY * lr / (lf + lr)
    fz_r = m * GRAVITY * lf / (lf + lr)
    cap_f, cap_r = mu * fz_f, mu * fz_r
    c = cfg.corner_stiffness
    cos_d, sin_d = torch.cos(steer), torch.sin(steer)
    for _ in range(cfg.substeps):
        u = vx.clamp_min(1.0)
        alpha_f = steer - torch.atan((vy + lf * r) / u)
        alpha_r = -torch.atan((vy - lr * r) / u)
        fy_f = cap_f * torch.tanh(c * alpha_f / cap_f)
        fy_r = cap_r * torch.tanh(c * alpha_r / cap_r)
        vx_dot = a + vy * r - fy_f * sin_d / m
        vy_dot = (fy_f * cos_d + fy_r) / m - vx * r
        r_dot = (lf * fy_f * cos_d - lr * fy_r) / iz
        vx = (vx + h * vx_dot).clamp_min(0.0)
        vy = vy + h * vy_dot
        r = r + h * r_dot
        cy, sy = torch.cos(yaw), torch.sin(yaw)
        x = x + h * (vx * cy - vy * sy)
        y = y + h * (vx * sy + vy * cy)
        yaw = yaw + h * r
    return VehicleState(x, y, yaw, vx, vy, r)
