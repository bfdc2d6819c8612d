"""Ball balancing on a tilting plate (MuJoCo, contact): the task where latency matters.

Model: ``sim/assets/ball_plate.xml`` -- a 0.30 m plate on a 2-DoF gimbal (``tilt_x`` about x,
then ``tilt_y`` about y) driven by position servos, and a free 2 cm ball rolling on it. The ball
accelerates at about (5/7) g sin(tilt) (0.7 m/s^2 at 0.1 rad), so without control it leaves
the plate in about a second, and random kicks (velocity changes of ``push_speed`` m/s with
probability ``push_prob`` per step) make open-loop action chunks drift: a controller acting on
observations 100 ms old fails (measured in ``docs/benchmarks.md``; tested).

Observation (plate frame, like a touch panel on the plate): ball position and velocity,
tilt angles and rates, target position and velocity (12). Action: tilt set-points (rad) for
the two servos. The target is a point moving on a circle (``target_amp``, ``target_omega``).
``ball_goal`` (``target_amp = 0``): a still goal mark per episode, anywhere within 8 cm; the
goal is planner-only in both, so the fast loop must learn it from the planner's chunks.
Success: the ball never leaves the plate and is within ``success_radius`` of the target for at
least ``success_fraction`` of the steps in the last ``success_window`` part of the episode.
Expert: PD on the ball state (from the observation alone, so a delayed observation gives a
delayed expert: :func:`ball_expert`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from tensordict import TensorDict

from edgerl.sim.mujoco.backends import load_model
from edgerl.sim.mujoco.task_env import RAND_FIELDS, MujocoTaskEnv, control_substeps
from edgerl.sim.randomization import DomainRandConfig
from edgerl.sim.vec_env import TaskSpec

__all__ = ["BALL_GOAL_DEFAULTS", "BallBalanceCfg", "BallBalanceEnv", "ball_expert",
           "make_ball_balance", "make_ball_goal"]

#: Plate half size (m), ball radius (m), plate-surface height above the pivot (m); see MJCF.
PLATE_HALF, BALL_RADIUS, SURFACE_Z = 0.15, 0.02, 0.005
#: Pivot position (m).
PIVOT_Z = 0.1
#: Rolling ball: linear acceleration per unit sin(tilt) (m/s^2).
ROLL_ACCEL = 5.0 / 7.0 * 9.81


@dataclass
class BallBalanceCfg:
    """Configuration of :class:`BallBalanceEnv`.

    Attributes:
        control_hz: Policy rate (Hz); must divide the 200 Hz physics rate.
        max_episode_steps: Episode limit in control steps.
        max_tilt: Tilt set-point limit (rad).
        init_pos: Initial ball position drawn in [-init_pos, init_pos]^2 (m, plate frame).
        target_center: Target circle centre drawn in [-target_center, target_center]^2 (m).
        target_amp: Radius of the target's circular motion (m); 0 = fixed target.
        target_omega: (min, max) angular speed of the target on its circle (rad/s).
        push_prob: Probability per env and control step of a kick to the ball.
        push_speed: Velocity change of a kick (m/s), random horizontal direction.
        success_radius: Ball-to-target distance counted as on target (m).
        success_window: Final fraction of the episode in which success is judged.
        success_fraction: Fraction of the window's steps that must be on target.
        expert_kp / expert_kd: Expert's PD gains (1/s^2, 1/s) on position / velocity error.
        backend: :class:`~edgerl.sim.mujoco.backends.MujocoBatch` backend.
        nthread: Physics threads.
        randomization: Per-env ball/plate mass, friction, joint damping, servo gain.
    """

    control_hz: float = 50.0
    max_episode_steps: int = 250
    max_tilt: float = 0.25
    init_pos: float = 0.08
    target_center: float = 0.05
    target_amp: float = 0.04
    target_omega: tuple[float, float] = (0.5, 1.5)
    push_prob: float = 0.05
    push_speed: float = 0.12
    success_radius: float = 0.03
    success_window: float = 0.3
    success_fraction: float = 0.9
    expert_kp: float = 16.0
    expert_kd: float = 8.0
    backend: str = "batch"
    nthread: int = 2
    randomization: DomainRandConfig = field(default_factory=DomainRandConfig)

    def __post_init__(self) -> None:
        self.randomization = DomainRandConfig.coerce(self.randomization)
        if not 0.0 < self.success_window <= 1.0 or not 0.0 < self.success_fraction <= 1.0:
            raise ValueError("ball_balance: success_window and success_fraction must be in (0, 1]")
        if self.init_pos >= PLATE_HALF or self.target_center + self.target_amp >= PLATE_HALF:
            raise ValueError("ball_balance: initial ball and target must lie on the plate "
                             f"(|x|, |y| < {PLATE_HALF} m)")
        if not 0.0 <= self.push_prob <= 1.0:
            raise ValueError(f"ball_balance: push_prob must be in [0, 1], got {self.push_prob}")


def ball_expert(obs: np.ndarray | torch.Tensor, cfg: BallBalanceCfg | None = None
                ) -> np.ndarray:
    """PD tilt set-points (N, 2) rad from policy observations (N, 12) (numpy or torch).

    Desired ball acceleration ``a = kp (target - p) + kd (target_vel - v)``; the tilt that
    produces it is ``a / ROLL_ACCEL``: +tilt_y rolls the ball to +x, +tilt_x rolls it to -y.
    """
    cfg = cfg or BallBalanceCfg()
    o = obs.detach().cpu().numpy() if isinstance(obs, torch.Tensor) else np.asarray(obs)
    o = o.astype(np.float64)
    acc = cfg.expert_kp * (o[:, 8:10] - o[:, 0:2]) + cfg.expert_kd * (o[:, 10:12] - o[:, 2:4])
    tilt = np.stack([-acc[:, 1], acc[:, 0]], axis=-1) / ROLL_ACCEL
    return np.clip(tilt, -cfg.max_tilt, cfg.max_tilt)


#: every env (the default ``rows`` of the geometry helpers: a view, no copy)
_ALL = slice(None)


class BallBalanceEnv(MujocoTaskEnv):
    """Vectorized ball-on-plate balancing; ``{"policy": (N, 12), "critic": (N, 14)}``.

    The critic group adds the ball height above the plate surface and the fell-off flag's
    margin (distance from the nearest edge), both in metres.
    """

    _rand_fields = RAND_FIELDS

    def __init__(self, num_envs: int = 64, device: str | torch.device = "cpu", seed: int = 0,
                 cfg: BallBalanceCfg | None = None) -> None:
        self.cfg = cfg or BallBalanceCfg()
        model = load_model("ball_plate.xml")
        self.substeps = control_substeps("ball_balance", self.cfg.control_hz, model)
        t = self.cfg.max_tilt
        self.spec = TaskSpec(
            name="ball_goal" if self.cfg.target_amp == 0.0 else "ball_balance",
            obs_names=["ball_x", "ball_y", "ball_vx", "ball_vy", "tilt_x", "tilt_y",
                       "tilt_x_vel", "tilt_y_vel", "target_x", "target_y", "target_vx",
                       "target_vy"],
            obs_units=["m", "m", "m/s", "m/s", "rad", "rad", "rad/s", "rad/s", "m", "m", "m/s",
                       "m/s"],
            action_names=["tilt_x_cmd", "tilt_y_cmd"], action_units=["rad", "rad"],
            action_low=[-t, -t], action_high=[t, t], control_hz=self.cfg.control_hz,
            max_episode_steps=self.cfg.max_episode_steps,
            # a camera sees the moving target; the touch panel and the encoders are fast
            planner_only=["target_x", "target_y", "target_vx", "target_vy"])
        self._init_task(model, num_envs, device, seed, self.cfg.backend, self.cfg.nthread)
        n = self.num_envs
        self._center = np.zeros((n, 2))
        self._omega = np.zeros(n)
        self._phase = np.zeros(n)
        self._on_target = np.zeros(n, dtype=np.int64)
        self._window_start = int(round(self.cfg.max_episode_steps * (1 - self.cfg.success_window)))
        self._window_len = self.cfg.max_episode_steps - self._window_start
        self._target_mocap = self.sim.field("mocap_pos")[:, 0]
        self._frame_cache: tuple[np.ndarray, ...] | None = None
        self.reset()

    # --- geometry -----------------------------------------------------------------------------
    def _plate_frame(self, rows: slice | np.ndarray = _ALL) -> tuple[np.ndarray, np.ndarray]:
        """Ball position (n, 3) relative to the plate surface centre and velocity (n, 3), both
        in the plate frame (R = Rx(tilt_x) Ry(tilt_y)), of the envs ``rows`` (default all).

        Position and velocity go through the rotation together, as one (n, 2, 3) array."""
        q, v = self.sim.qpos[rows], self.sim.qvel[rows]
        cs = np.cos(q[:, 0:2])
        sn = np.sin(q[:, 0:2])
        ca, cb, sa, sb = cs[:, 0:1], cs[:, 1:2], sn[:, 0:1], sn[:, 1:2]
        x = np.empty((q.shape[0], 2, 3))
        x[:, 0] = q[:, 2:5]
        x[:, 0, 2] -= PIVOT_Z
        x[:, 1] = v[:, 2:5]
        # Rx^T: y' = c y + s z, z' = -s y + c z ; then Ry^T: x'' = c x - s z', z'' = s x + c z'
        y1 = ca * x[:, :, 1] + sa * x[:, :, 2]
        z1 = -sa * x[:, :, 1] + ca * x[:, :, 2]
        out = np.empty_like(x)
        out[:, :, 0] = cb * x[:, :, 0] - sb * z1
        out[:, :, 1] = y1
        out[:, :, 2] = sb * x[:, :, 0] + cb * z1
        local, vel = out[:, 0], out[:, 1]
        local[:, 2] -= SURFACE_Z
        return local, vel

    def _target(self, steps: np.ndarray, rows: slice | np.ndarray = _ALL
                ) -> tuple[np.ndarray, np.ndarray]:
        """Target position and velocity (n, 2) at episode step ``steps`` (n,) of the envs
        ``rows`` (default all)."""
        t = steps * self.spec.control_dt
        omega = self._omega[rows]
        ang = omega * t + self._phase[rows]
        amp = self.cfg.target_amp
        unit = np.empty((ang.shape[0], 2))
        np.cos(ang, out=unit[:, 0])
        np.sin(ang, out=unit[:, 1])
        vel = np.empty_like(unit)
        w = amp * omega
        np.multiply(w, -unit[:, 1], out=vel[:, 0])
        np.multiply(w, unit[:, 0], out=vel[:, 1])
        return self._center[rows] + amp * unit, vel

    # --- MujocoTaskEnv hooks ------------------------------------------------------------------
    def _reset_task(self, ids: np.ndarray) -> None:
        n, g, c = ids.size, self.generator, self.cfg
        u = torch.rand(n, 6, generator=g, dtype=torch.float64).numpy()
        pos = (u[:, 0:2] * 2 - 1) * c.init_pos
        self.sim.qpos[ids, 2:4] = pos
        self.sim.qpos[ids, 4] = PIVOT_Z + SURFACE_Z + BALL_RADIUS
        self._center[ids] = (u[:, 2:4] * 2 - 1) * c.target_center
        lo, hi = c.target_omega
        self._omega[ids] = (lo + (hi - lo) * u[:, 4]) * np.where(u[:, 5] < 0.5, -1.0, 1.0)
        self._phase[ids] = u[:, 5] * 4 * np.pi
        self._on_target[ids] = 0
        tgt, tgt_vel = self._target(self._ep_len[ids], ids)
        self._target_mocap[ids, :2] = tgt
        if self._frame_cache is not None:  # mid-step (after _evaluate): refresh these rows
            local, vel = self._plate_frame(ids)
            for cached, fresh in zip(self._frame_cache, (local, vel, tgt, tgt_vel)):
                cached[ids] = fresh

    def _apply_action(self, act: np.ndarray) -> None:
        self.sim.ctrl[:] = act
        if self.cfg.push_prob > 0.0 and not self._in_lookahead:
            self._kick()

    def _kick(self) -> None:
        u = torch.rand(self.num_envs, 2, generator=self.generator, dtype=torch.float64).numpy()
        hit = u[:, 0] < self.cfg.push_prob
        if hit.any():
            ang = u[hit, 1] * 2 * np.pi
            self.sim.qvel[hit, 2:4] += self.cfg.push_speed * np.stack([np.cos(ang),
                                                                        np.sin(ang)], axis=-1)

    def _frame(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ball position, ball velocity, target, target velocity) in the plate frame, computed
        once per step (``_evaluate`` fills the cache, ``_observe`` consumes it)."""
        if self._frame_cache is None:
            local, vel = self._plate_frame()
            tgt, tgt_vel = self._target(self._ep_len)
            self._frame_cache = (local, vel, tgt, tgt_vel)
        return self._frame_cache

    def _evaluate(self, act: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        local, _, tgt, _ = self._frame()
        self._target_mocap[:, :2] = tgt
        fell = ((np.abs(local[:, 0]) > PLATE_HALF) | (np.abs(local[:, 1]) > PLATE_HALF)
                | (local[:, 2] < 0.0))
        dist = np.linalg.norm(local[:, :2] - tgt, axis=-1)
        on = (dist < self.cfg.success_radius) & (self._ep_len > self._window_start)
        self._on_target += on
        reward = (np.exp(-(dist / 0.05) ** 2) - 0.1 * np.sum((act / self.cfg.max_tilt) ** 2, -1)
                  - 10.0 * fell)
        return reward, fell, np.zeros(self.num_envs, dtype=bool)

    def _success_at_end(self, success: np.ndarray, terminated: np.ndarray,
                        time_outs: np.ndarray) -> np.ndarray:
        return time_outs & (self._on_target >= self.cfg.success_fraction * self._window_len)

    def _policy_obs(self) -> tuple[np.ndarray, np.ndarray]:
        local, vel, tgt, tgt_vel = self._frame()
        self._frame_cache = None
        obs = np.empty((self.num_envs, 12), dtype=np.float32)
        obs[:, 0:2] = local[:, :2]
        obs[:, 2:4] = vel[:, :2]
        obs[:, 4:6] = self.sim.qpos[:, 0:2]
        obs[:, 6:8] = self.sim.qvel[:, 0:2]
        obs[:, 8:10] = tgt
        obs[:, 10:12] = tgt_vel
        return obs, local

    def _observe(self) -> TensorDict:
        obs, local = self._policy_obs()
        critic = np.empty((self.num_envs, 14), dtype=np.float32)
        critic[:, :12] = obs
        critic[:, 12] = local[:, 2] - BALL_RADIUS
        critic[:, 13] = PLATE_HALF - np.max(np.abs(local[:, :2]), axis=-1)
        return TensorDict({"policy": torch.from_numpy(obs).to(self.device),
                           "critic": torch.from_numpy(critic).to(self.device)},
                          batch_size=[self.num_envs], device=self.device)

    def _expert(self) -> np.ndarray:
        return ball_expert(self._policy_obs()[0], self.cfg)

    def _save_task_state(self) -> np.ndarray:
        return self._ep_len.copy()

    def _restore_task_state(self, saved: np.ndarray) -> None:
        self._ep_len[:] = saved

    def _advance_task_state(self) -> None:
        self._ep_len += 1


def make_ball_balance(num_envs: int = 64, device: str | torch.device = "cpu", seed: int = 0,
                      **cfg_kwargs: object) -> BallBalanceEnv:
    """Registry factory: ``make_task("ball_balance", num_envs=..., device=..., seed=...)``."""
    return BallBalanceEnv(num_envs=num_envs, device=device, seed=seed,
                          cfg=BallBalanceCfg(**cfg_kwargs))  # type: ignore[arg-type]


#: ``ball_goal``'s defaults: a still goal mark anywhere within 8 cm of the centre (only the
#: planner's camera sees it); the ball starts anywhere within 8 cm too.
BALL_GOAL_DEFAULTS: dict[str, object] = {"target_amp": 0.0, "target_center": 0.08}


def make_ball_goal(num_envs: int = 64, device: str | torch.device = "cpu", seed: int = 0,
                   **cfg_kwargs: object) -> BallBalanceEnv:
    """Registry factory of ``ball_goal``: :data:`BALL_GOAL_DEFAULTS`, then ``cfg``."""
    return make_ball_balance(num_envs, device, seed, **{**BALL_GOAL_DEFAULTS, **cfg_kwargs})
