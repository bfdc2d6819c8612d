"""``driving``: multi-agent bicycle-model vehicles on a curved multi-lane road (torch).

Each env is a world with ``n_agents`` vehicles on a road whose centerline is
``y = amp * sin(2 pi x / wavelength)`` with ``n_lanes`` lanes of ``lane_width``. Agent 0 is the
ego vehicle, controlled by the policy; the others drive with the scripted expert (lane keeping
+ speed control + gap keeping) at their own cruise speeds. Everything is a ``(num_envs,
n_agents)`` tensor; there is no Python loop over envs or agents.

Road, config and vehicle models (kinematic or dynamic bicycle, surface friction ``mu``) are in
:mod:`edgerl.sim.tasks.driving_dynamics`.

Ego observation (10): lateral error to its lane centre (m), heading error (rad), speed (m/s),
lateral velocity (m/s), yaw rate (rad/s), speed error to the cruise speed (m/s), road heading
change over the next 20 m (rad), gap to the vehicle ahead in the lane / 50 m (clipped to 1),
closing speed to it (m/s, 0 when none), surface mu (all but speed, lateral velocity and yaw
rate only the planner sees: :data:`PLANNER_ONLY`). Action (2): acceleration and steering in
[-1, 1], times ``accel_max`` (m/s^2) and ``steer_max`` (rad).

The ego succeeds when it drives ``goal_distance`` metres; it fails on a collision (bounding
boxes in road coordinates overlap) or when it leaves its lane (``|lateral error| >
lane_width / 2``); reaching ``max_episode_steps`` first is a time-out (not a success).
``extras`` also holds ``"collision"`` and ``"off_lane"`` (bool (N,)), this step's failure
reasons.
"""

from __future__ import annotations

import math
import time

import torch
from tensordict import TensorDict

from edgerl.sim.randomization import DomainRandomizer
from edgerl.sim.tasks.driving_dynamics import (
    GRAVITY,
    SURFACE_MU,
    DrivingCfg,
    Road,
    VehicleState,
    bicycle_step,
    wrap_angle,
)
from edgerl.sim.tasks.torch_task import TorchTaskEnv
from edgerl.sim.vec_env import TaskSpec

__all__ = ["DrivingEnv", "make_driving"]

OBS_NAMES = ["lat_err", "heading_err", "speed", "lat_vel", "yaw_rate", "speed_err",
             "road_heading_ahead", "gap_ahead", "closing_speed", "surface_mu"]
OBS_UNITS = ["m", "rad", "m/s", "m/s", "rad/s", "m/s", "rad", "1/50 m", "m/s", "-"]
#: What only the slow planner knows: where the lane is (camera perception), the route's cruise
#: speed, the map's curvature ahead, the tracked vehicle ahead and the surface. The fast policy
#: reads what odometry and the IMU give at the control rate: speed, lateral velocity, yaw rate.
PLANNER_ONLY = ("lat_err", "heading_err", "speed_err", "road_heading_ahead", "gap_ahead",
                "closing_speed", "surface_mu")


class DrivingEnv(TorchTaskEnv):
    """Vectorized multi-agent driving; ``{"policy": (N, 10)}`` is the ego's observation.

    Args:
        num_envs: Worlds N (each with ``cfg.n_agents`` vehicles).
        device: Torch device. seed: CPU generator seed. cfg: :class:`DrivingCfg`.
    """

    def __init__(self, num_envs: int = 64, device: str | torch.device = "cpu", seed: int = 0,
                 cfg: DrivingCfg | None = None) -> None:
        if num_envs < 1:
            raise ValueError(f"driving: num_envs must be >= 1, got {num_envs}")
        self.cfg = cfg or DrivingCfg()
        c = self.cfg
        self.num_envs, self.num_actions = int(num_envs), 2
        self.n_agents = c.n_agents
        self.device = torch.device(device)
        self.max_episode_length = c.max_episode_steps
        self.spec = TaskSpec(
            name="driving", obs_names=list(OBS_NAMES), obs_units=list(OBS_UNITS),
            action_names=["accel", "steer"], action_units=["normalized", "normalized"],
            action_low=[-1.0, -1.0], action_high=[1.0, 1.0], control_hz=c.control_hz,
            max_episode_steps=c.max_episode_steps, planner_only=list(PLANNER_ONLY))
        self.road = Road(c)
        self.seed(seed)
        self.randomizer = DomainRandomizer(c.randomization, self.num_envs, self.device)
        n, k, dev = self.num_envs, self.n_agents, self.device
        zeros = torch.zeros(n, k, device=dev)
        self.state = VehicleState(*(zeros.clone() for _ in range(6)))
        self.lane = torch.zeros(n, k, dtype=torch.long, device=dev)
        self.cruise = torch.zeros(n, k, device=dev)
        self.mu = torch.ones(n, device=dev)
        self.start_x = torch.zeros(n, device=dev)
        self.episode_length_buf = torch.zeros(n, dtype=torch.long, device=dev)
        half = (c.n_lanes - 1) / 2.0
        self._lane_offsets = (torch.arange(c.n_lanes, device=dev) - half) * c.lane_width
        self._mu_table = torch.tensor([SURFACE_MU["dry"], SURFACE_MU["wet"], SURFACE_MU["ice"]])
        self.reset()

    # --- geometry -----------------------------------------------------------------------------
    def _frenet(self, s: VehicleState) -> tuple[torch.Tensor, torch.Tensor]:
        """Lateral error to each vehicle's lane centre (m) and heading error (rad)."""
        slope = self.road.slope(s.x)
        # cos(atan(slope)) = 1 / sqrt(1 + slope^2)
        lat = (s.y - self.road.y(s.x)) * torch.rsqrt(1.0 + slope * slope)
        return lat - self._offset, wrap_angle(s.yaw - torch.atan(slope))

    def _leads(self, s: VehicleState, same_lane: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Gap (m, bumper to bumper, inf if none) and speed of the vehicle ahead in each lane."""
        dx = s.x[:, None, :] - s.x[:, :, None]  # (N, K, K): dx[i, j] = x_j - x_i
        gap = (dx - self.cfg.length).masked_fill_(~(same_lane & (dx > 0)), math.inf)
        # A loop over the K agents (not envs): torch's min(dim) with indices is pathologically
        # slow on tiny last dims with several threads.
        gap_min, lead_v = gap[..., 0], s.vx[:, :1].expand_as(gap[..., 0])
        for j in range(1, gap.shape[-1]):
            closer = gap[..., j] < gap_min
            gap_min = torch.where(closer, gap[..., j], gap_min)
            lead_v = torch.where(closer, s.vx[:, j:j + 1], lead_v)
        return gap_min, lead_v

    def _geometry(self, s: VehicleState, same_lane: torch.Tensor | None = None
                  ) -> tuple[torch.Tensor, ...]:
        """(lateral error, heading error, gap ahead, lead speed), each (N, K)."""
        lat, head = self._frenet(s)
        gap, lead_v = self._leads(s, self._same_lane if same_lane is None else same_lane)
        return lat, head, gap, lead_v

    def _expert_controls(self, s: VehicleState, geo: tuple[torch.Tensor, ...]
                         ) -> tuple[torch.Tensor, torch.Tensor]:
        """Normalized (accel, steer) (N, K) of the scripted driver for every vehicle."""
        c = self.cfg
        lat, head, gap, lead_v = geo
        v = s.vx
        kappa = self.road.curvature(s.x + 0.3 * v)
        steer = ((c.l_front + c.l_rear) * kappa - head
                 - torch.atan(0.8 * lat / v.clamp_min(2.0)) - 0.05 * s.r)
        safe = torch.where(torch.isfinite(gap), lead_v + 0.5 * (gap - 8.0), self.cruise)
        # Corner speed the surface allows: v^2 * kappa_max <= 0.7 mu g.
        kmax = self.road.max_curvature
        corner = torch.sqrt(0.7 * self.mu[:, None] * GRAVITY / kmax)
        v_des = torch.minimum(torch.minimum(self.cruise, safe), corner).clamp_min(0.0)
        accel = 1.5 * (v_des - v)
        return ((accel / c.accel_max).clamp(-1.0, 1.0), (steer / c.steer_max).clamp(-1.0, 1.0))

    def _apply(self, s: VehicleState, accel_n: torch.Tensor, steer_n: torch.Tensor
               ) -> VehicleState:
        r, c = self.randomizer, self.cfg
        gain = r.actuator_gain[:, None]
        mu = (self.mu * r.friction_scale)[:, None]
        return bicycle_step(s, accel_n * (c.accel_max * gain), steer_n * c.steer_max, mu, c,
                            r.mass_scale[:, None])

    # --- VecEnv -------------------------------------------------------------------------------
    def _obs(self) -> TensorDict:
        s = self.state
        lat, head, gap, lead_v = self._geo
        g0, lv0 = gap[:, 0], lead_v[:, 0]
        has_lead = torch.isfinite(g0)
        ahead = self.road.heading(s.x[:, 0] + 20.0) - self.road.heading(s.x[:, 0])
        obs = torch.stack((
            lat[:, 0], head[:, 0], s.vx[:, 0], s.vy[:, 0], s.r[:, 0],
            s.vx[:, 0] - self.cruise[:, 0], ahead,
            torch.where(has_lead, (g0 / 50.0).clamp(max=1.0), torch.ones_like(g0)),
            torch.where(has_lead, s.vx[:, 0] - lv0, torch.zeros_like(g0)),
            self.mu * self.randomizer.friction_scale), dim=-1)
        return TensorDict({"policy": obs}, batch_size=[self.num_envs], device=self.device)

    def _reset_ids(self, env_ids: torch.Tensor) -> None:
        n = int(env_ids.numel())
        c, g, k, dev = self.cfg, self.generator, self.n_agents, self.device
        u = torch.rand(n, k, 5, generator=g)
        lanes = torch.randint(0, c.n_lanes, (n, k), generator=g)
        lanes[:, 0] = c.n_lanes // 2
        slot = torch.arange(k, dtype=torch.float32)
        x = torch.where(slot == 0, torch.zeros(1), 15.0 + 20.0 * (slot - 1)) + (u[..., 0] - 0.5) * 6
        x[:, 0] = 0.0
        lat0 = (u[..., 1] - 0.5) * torch.where(slot == 0, 1.0, 0.2)
        head0 = (u[..., 2] - 0.5) * torch.where(slot == 0, 0.2, 0.02)
        lo, hi = c.other_speed
        cruise = c.cruise_speed * torch.where(slot == 0, torch.ones(1), lo + (hi - lo) * u[..., 3])
        speed = cruise * (0.8 + 0.2 * u[..., 4])
        if c.surface == "mixed":
            mu = self._mu_table[torch.randint(0, 3, (n,), generator=g)]
        else:
            mu = torch.full((n,), SURFACE_MU[c.surface])
        xs = x.to(dev)
        rh = self.road.heading(xs)
        offset = self._lane_offsets[lanes.to(dev)]
        s = self.state
        s.x[env_ids] = xs
        s.y[env_ids] = self.road.y(xs) + (offset + lat0.to(dev)) / torch.cos(rh)
        s.yaw[env_ids] = rh + head0.to(dev)
        s.vx[env_ids] = speed.to(dev)
        s.vy[env_ids] = 0.0
        s.r[env_ids] = 0.0
        self.lane[env_ids] = lanes.to(dev)
        self.cruise[env_ids] = cruise.to(dev)
        self.mu[env_ids] = mu.to(dev)
        self.start_x[env_ids] = 0.0
        self.episode_length_buf[env_ids] = 0
        self.randomizer.resample(env_ids, g)
        self._same_lane = self.lane[:, None, :] == self.lane[:, :, None]
        self._offset = self._lane_offsets[self.lane]
        self._geo = self._geometry(self.state)

    def _step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        c = self.cfg
        act = actions.to(self.device).clamp(-1.0, 1.0)
        accel_n, steer_n = self._expert_controls(self.state, self._geo)
        accel_n[:, 0] = act[:, 0]
        steer_n[:, 0] = act[:, 1]
        prev_x = self.state.x[:, 0]
        self.state = s = self._apply(self.state, accel_n, steer_n)
        self.episode_length_buf += 1
        self._geo = self._geometry(s)
        lat, head = self._geo[0], self._geo[1]
        off_lane = lat[:, 0].abs() > 0.5 * c.lane_width
        # Collision: ego box vs other boxes in road coordinates.
        dx = (s.x[:, 1:] - s.x[:, :1]).abs()
        dl = ((lat[:, 1:] + self._offset[:, 1:]) - (lat[:, :1] + self._offset[:, :1])).abs()
        collision = ((dx < c.length) & (dl < c.width)).any(dim=1)
        goal = (s.x[:, 0] - self.start_x) >= c.goal_distance
        failed = off_lane | collision
        success = goal & ~failed
        time_out = (self.episode_length_buf >= self.max_episode_length) & ~failed & ~goal
        progress = (s.x[:, 0] - prev_x) * c.control_hz / c.cruise_speed
        reward = (progress - 0.5 * (2.0 * lat[:, 0] / c.lane_width) ** 2 - 0.1 * head[:, 0] ** 2
                  - 0.05 * act[:, 1] ** 2)
        reward = torch.where(failed, torch.full_like(reward, -10.0), reward)
        dones = failed | goal | time_out
        extras = {"time_outs": time_out, "success": success, "collision": collision,
                  "off_lane": off_lane,
                  "log": {"/driving/collision_rate": collision.float().mean(),
                          "/driving/off_lane_rate": off_lane.float().mean()}}
        ids = dones.nonzero().squeeze(-1)
        if ids.numel():
            self.reset(ids)
        return self._obs(), reward, dones, extras

    def assign_lanes(self, lanes: torch.Tensor) -> None:
        """Move every vehicle's lane assignment (int64 (N, K)); drivers steer to the new lane.

        For scripted scenarios and tests (e.g. put a slow car in the ego's lane).
        """
        if tuple(lanes.shape) != (self.num_envs, self.n_agents):
            raise ValueError(f"lanes must have shape {(self.num_envs, self.n_agents)}, got "
                             f"{tuple(lanes.shape)}")
        if bool((lanes < 0).any()) or bool((lanes >= self.cfg.n_lanes).any()):
            raise ValueError(f"lanes must be in [0, {self.cfg.n_lanes - 1}]")
        self.lane = lanes.to(self.device, torch.long).clone()
        self._same_lane = self.lane[:, None, :] == self.lane[:, :, None]
        self._offset = self._lane_offsets[self.lane]
        self._geo = self._geometry(self.state)

    # --- edgerl additions ---------------------------------------------------------------------
    def expert_action(self) -> torch.Tensor:
        accel_n, steer_n = self._expert_controls(self.state, self._geo)
        return torch.stack((accel_n[:, 0], steer_n[:, 0]), dim=-1)

    def expert_chunk(self, horizon: int, env_ids: torch.Tensor | None = None,
                     prefix: torch.Tensor | None = None) -> torch.Tensor:
        """Expert actions of the ego along the model rolled forward (all agents move).

        ``prefix`` (n, D, 2), optional: the ego's committed rows for the first steps (what
        it executes while the planner thinks); NaN rows are the expert's. Rows ``< D`` of
        the chunk are then the committed ones and the expert plans from where they lead.
        """
        keep = (self.state, self.mu, self.lane, self.cruise, self.randomizer, self._offset)
        if env_ids is not None:
            self._select(env_ids)
        same_lane = self.lane[:, None, :] == self.lane[:, :, None]
        try:
            s, rows = self.state, []
            for i in range(int(horizon)):
                accel_n, steer_n = self._expert_controls(s, self._geometry(s, same_lane))
                if prefix is not None and i < prefix.shape[1]:
                    row = prefix[:, i].to(accel_n.device).clamp(-1.0, 1.0)
                    accel_n[:, 0] = torch.where(row[:, 0].isnan(), accel_n[:, 0], row[:, 0])
                    steer_n[:, 0] = torch.where(row[:, 1].isnan(), steer_n[:, 0], row[:, 1])
                rows.append(torch.stack((accel_n[:, 0], steer_n[:, 0]), dim=-1))
                s = self._apply(s, accel_n, steer_n)
            return torch.stack(rows, dim=1)
        finally:
            self.state, self.mu, self.lane, self.cruise, self.randomizer, self._offset = keep

    def _select(self, ids: torch.Tensor) -> None:
        """Temporarily narrow the state to ``ids`` (restored by the caller)."""
        s = self.state
        self.state = VehicleState(s.x[ids], s.y[ids], s.yaw[ids], s.vx[ids], s.vy[ids], s.r[ids])
        self.mu, self.lane, self.cruise = self.mu[ids], self.lane[ids], self.cruise[ids]
        self._offset = self._offset[ids]
        r = self.randomizer
        sub = DomainRandomizer(r.cfg, int(ids.numel()), self.device)
        for name, value in r.as_dict().items():
            setattr(sub, name, value[ids])
        self.randomizer = sub

    def raw_physics_steps_per_s(self, num_envs: int, steps: int) -> float:
        """Env-steps/s of ``bicycle_step`` alone for ``num_envs`` worlds, zero control."""
        z = torch.zeros(num_envs, self.n_agents, device=self.device)
        s = VehicleState(z, z.clone(), z.clone(), z + self.cfg.cruise_speed, z.clone(), z.clone())
        mu = torch.ones(num_envs, 1, device=self.device)
        s = bicycle_step(s, z, z, mu, self.cfg)  # warm-up
        start = time.perf_counter()
        for _ in range(steps):
            s = bicycle_step(s, z, z, mu, self.cfg)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return num_envs * steps / (time.perf_counter() - start)


def make_driving(num_envs: int = 64, device: str | torch.device = "cpu", seed: int = 0,
                 **cfg_kwargs: object) -> DrivingEnv:
    """Registry factory: ``make_task("driving", num_envs=..., model="kinematic", ...)``."""
    return DrivingEnv(num_envs=num_envs, device=device, seed=seed, cfg=DrivingCfg(**cfg_kwargs))
