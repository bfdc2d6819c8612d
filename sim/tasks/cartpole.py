"""``cartpole``: torch-vectorized cart-pole balancing, the fast smoke / demo task.

State per env: cart position x (m), cart velocity (m/s), pole angle theta (rad, 0 = upright),
pole angular velocity (rad/s). Action: one normalized force in [-1, 1] times ``force_max`` (N)
times the randomized actuator gain. Dynamics: the classic Barto/Sutton cart-pole with viscous
cart friction and pole damping, integrated with ``substeps`` semi-implicit Euler steps per
50 Hz control step.

An episode fails when ``|theta| > theta_limit`` or ``|x| > x_limit``; it succeeds when it
reaches ``max_episode_steps`` without failing (``extras["success"]``, and a time-out in
``extras["time_outs"]``). The expert is an LQR controller on the linearized nominal model,
which balances every initial state of the reset distribution.

``cartpole_goal`` (``goal_range > 0``): each episode draws a goal cart position in
``[-goal_range, goal_range]``. The observation gains ``goal_x``, which only the planner sees
(``TaskSpec.planner_only``): the fast policy reads the cart and pole state, as a robot's
encoders give them at the control rate, and learns where to go only from the planner's chunk.
Success additionally needs the cart within ``goal_tol`` of the goal at the end. The expert is
the same LQR regulating ``x - goal``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
from tensordict import TensorDict

from edgerl.sim.randomization import DomainRandConfig, DomainRandomizer
from edgerl.sim.tasks.torch_task import TorchTaskEnv
from edgerl.sim.vec_env import TaskSpec

__all__ = ["CARTPOLE_GOAL_DEFAULTS", "CartpoleCfg", "CartpoleEnv", "make_cartpole",
           "make_cartpole_goal"]


@dataclass
class CartpoleCfg:
    """Cart-pole parameters (SI units).

    Attributes:
        control_hz: Policy rate (Hz).
        substeps: Integration steps per control step.
        max_episode_steps: Episode length (control steps); reaching it is success.
        cart_mass / pole_mass: kg. pole_half_length: m. gravity: m/s^2.
        force_max: Force (N) for action 1.0.
        cart_friction: Viscous cart friction (N per m/s). pole_damping: N*m per rad/s.
        theta_limit / x_limit: Failure bounds (rad, m).
        init_theta / init_x / init_vel: Half-widths of the uniform reset distribution
            (rad, m, and m/s or rad/s for both velocities).
        randomization: Per-env physical randomization at reset.
        goal_range: Goal cart positions are drawn in ``[-goal_range, goal_range]`` (m);
            0 = the classic task without a goal (and without the ``goal_x`` observation).
        goal_tol: ``|x - goal|`` (m) at the end of the episode that counts as reached.
    """

    control_hz: float = 50.0
    substeps: int = 2
    max_episode_steps: int = 100
    cart_mass: float = 1.0
    pole_mass: float = 0.1
    pole_half_length: float = 0.5
    gravity: float = 9.81
    force_max: float = 10.0
    cart_friction: float = 0.1
    pole_damping: float = 0.002
    theta_limit: float = 0.6
    x_limit: float = 2.4
    init_theta: float = 0.25
    init_x: float = 0.5
    init_vel: float = 0.5
    randomization: DomainRandConfig = field(default_factory=DomainRandConfig)
    goal_range: float = 0.0
    goal_tol: float = 0.15

    def __post_init__(self) -> None:
        if self.control_hz <= 0 or self.substeps < 1 or self.max_episode_steps < 1:
            raise ValueError("cartpole: control_hz > 0, substeps >= 1 and max_episode_steps >= 1")
        if not 0.0 <= self.goal_range < self.x_limit or self.goal_tol <= 0:
            raise ValueError(f"cartpole: goal_range must be in [0, x_limit={self.x_limit}) m and "
                             f"goal_tol > 0, got {self.goal_range} and {self.goal_tol}")
        self.randomization = DomainRandConfig.coerce(self.randomization)

    @property
    def has_goal(self) -> bool:
        """Whether episodes carry a planner-only goal position."""
        return self.goal_range > 0


def cartpole_dynamics(state: torch.Tensor, force: torch.Tensor, cfg: CartpoleCfg,
                      mass_scale: torch.Tensor | float = 1.0,
                      friction_scale: torch.Tensor | float = 1.0,
                      damping_scale: torch.Tensor | float = 1.0) -> torch.Tensor:
    """One control step: ``state`` (N, 4) and ``force`` (N,) in newtons -> next state (N, 4).

    Pure function (no side effects), used by ``step``, the expert rollout and the raw
    physics benchmark.
    """
    h = 1.0 / (cfg.control_hz * cfg.substeps)
    m_c = cfg.cart_mass * mass_scale
    m_p = cfg.pole_mass * mass_scale
    total = m_c + m_p
    length = cfg.pole_half_length
    mu = cfg.cart_friction * friction_scale
    damp = cfg.pole_damping * damping_scale
    x, x_dot, th, th_dot = state.unbind(-1)
    for _ in range(cfg.substeps):
        sin, cos = torch.sin(th), torch.cos(th)
        temp = (force - mu * x_dot + m_p * length * th_dot * th_dot * sin) / total
        th_acc = (cfg.gravity * sin - cos * temp - damp * th_dot / (m_p * length)) / (
            length * (4.0 / 3.0 - m_p * cos * cos / total))
        x_acc = temp - m_p * length * th_acc * cos / total
        x_dot = x_dot + h * x_acc
        th_dot = th_dot + h * th_acc
        x = x + h * x_dot
        th = th + h * th_dot
    return torch.stack((x, x_dot, th, th_dot), dim=-1)


def lqr_gain(cfg: CartpoleCfg, q: tuple[float, ...] = (1.0, 0.5, 20.0, 1.0),
             r: float = 0.5) -> np.ndarray:
    """Discrete LQR gain K (1, 4) on the linearized nominal model: ``a = -K @ state``."""
    zero_s = torch.zeros(1, 4, dtype=torch.float64)
    zero_a = torch.zeros(1, dtype=torch.float64)
    a_mat = torch.autograd.functional.jacobian(
        lambda s: cartpole_dynamics(s, zero_a, cfg), zero_s).reshape(4, 4).numpy()
    b_mat = torch.autograd.functional.jacobian(
        lambda a: cartpole_dynamics(zero_s, a * cfg.force_max, cfg), zero_a).reshape(4, 1).numpy()
    q_mat, r_mat = np.diag(q), np.array([[r]])
    p = q_mat.copy()
    for _ in range(2000):  # Riccati iteration; converges in a few hundred steps
        k = np.linalg.solve(r_mat + b_mat.T @ p @ b_mat, b_mat.T @ p @ a_mat)
        p_next = q_mat + a_mat.T @ p @ (a_mat - b_mat @ k)
        if np.max(np.abs(p_next - p)) < 1e-10:
            p = p_next
            break
        p = p_next
    return np.linalg.solve(r_mat + b_mat.T @ p @ b_mat, b_mat.T @ p @ a_mat)


class CartpoleEnv(TorchTaskEnv):
    """Vectorized cart-pole; observations ``{"policy": (N, 4)}`` = [x, x_dot, theta, theta_dot]
    (``(N, 5)`` with ``goal_x`` appended when ``cfg.goal_range > 0``).

    Args:
        num_envs: Number of environments N.
        device: Torch device for every tensor.
        seed: Seed of the CPU generator used for resets and randomization.
        cfg: :class:`CartpoleCfg`.
    """

    def __init__(self, num_envs: int = 64, device: str | torch.device = "cpu", seed: int = 0,
                 cfg: CartpoleCfg | None = None) -> None:
        if num_envs < 1:
            raise ValueError(f"cartpole: num_envs must be >= 1, got {num_envs}")
        self.cfg = cfg or CartpoleCfg()
        self.num_envs = int(num_envs)
        self.num_actions = 1
        self.device = torch.device(device)
        self.max_episode_length = self.cfg.max_episode_steps
        goal = self.cfg.has_goal
        self.spec = TaskSpec(
            name="cartpole_goal" if goal else "cartpole",
            obs_names=["cart_x", "cart_vel", "pole_angle", "pole_vel"] + ["goal_x"] * goal,
            obs_units=["m", "m/s", "rad", "rad/s"] + ["m"] * goal, action_names=["cart_force"],
            action_units=["normalized"], action_low=[-1.0], action_high=[1.0],
            control_hz=self.cfg.control_hz, max_episode_steps=self.cfg.max_episode_steps,
            planner_only=["goal_x"] * goal)
        #: (N,) goal cart position (m); zeros without a goal.
        self.goal = torch.zeros(self.num_envs, device=self.device)
        self.seed(seed)
        self.randomizer = DomainRandomizer(self.cfg.randomization, self.num_envs, self.device)
        gain = lqr_gain(self.cfg)
        self._lqr = torch.as_tensor(gain, dtype=torch.float32, device=self.device).reshape(4)
        self.state = torch.zeros(self.num_envs, 4, device=self.device)
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self.reset()

    # --- helpers ------------------------------------------------------------------------------
    def _physics(self, state: torch.Tensor, action: torch.Tensor,
                 env_ids: torch.Tensor | None = None) -> torch.Tensor:
        r = self.randomizer
        sel = (lambda t: t) if env_ids is None else (lambda t: t[env_ids])
        force = action.clamp(-1.0, 1.0) * (self.cfg.force_max * sel(r.actuator_gain))
        return cartpole_dynamics(state, force, self.cfg, sel(r.mass_scale),
                                 sel(r.friction_scale), sel(r.damping_scale))

    def _obs(self) -> TensorDict:
        obs = torch.cat((self.state, self.goal[:, None]), -1) if self.cfg.has_goal else \
            self.state.clone()
        return TensorDict({"policy": obs}, batch_size=[self.num_envs], device=self.device)

    def _error(self, state: torch.Tensor, env_ids: torch.Tensor | None = None) -> torch.Tensor:
        """State relative to the goal (N, 4): the LQR regulates it to zero."""
        goal = self.goal if env_ids is None else self.goal[env_ids]
        err = state.clone()
        err[:, 0] -= goal
        return err

    # --- VecEnv (get_observations, reset: TorchTaskEnv) ---------------------------------------
    def _reset_ids(self, env_ids: torch.Tensor) -> None:
        n = int(env_ids.numel())
        c = self.cfg
        half = torch.tensor([c.init_x, c.init_vel, c.init_theta, c.init_vel])
        u = torch.rand(n, 4, generator=self.generator) * 2.0 - 1.0
        self.state[env_ids] = (u * half).to(self.device)
        if c.has_goal:
            g = (torch.rand(n, generator=self.generator) * 2.0 - 1.0) * c.goal_range
            self.goal[env_ids] = g.to(self.device)
        self.episode_length_buf[env_ids] = 0
        self.randomizer.resample(env_ids, self.generator)

    def _step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        a = actions.to(self.device)[:, 0]
        self.state = self._physics(self.state, a)
        self.episode_length_buf += 1
        x, _, th, _ = self.state.unbind(-1)
        failed = (th.abs() > self.cfg.theta_limit) | (x.abs() > self.cfg.x_limit)
        time_out = (self.episode_length_buf >= self.max_episode_length) & ~failed
        off = x - self.goal
        reward = (1.0 - 0.5 * (th / self.cfg.theta_limit) ** 2 - 0.05 * off * off
                  - 0.01 * a.clamp(-1.0, 1.0) ** 2)
        success = time_out.clone()
        if self.cfg.has_goal:
            near = off.abs() < self.cfg.goal_tol
            reward = reward - 0.5 * off.abs() + 0.5 * near.float()
            success &= near
        reward = torch.where(failed, torch.full_like(reward, -5.0), reward)
        dones = failed | time_out
        extras = {"time_outs": time_out, "success": success,
                  "log": {"/cartpole/fail_rate": failed.float().mean()}}
        done_ids = dones.nonzero().squeeze(-1)
        if done_ids.numel():
            self.reset(done_ids)
        return self._obs(), reward, dones, extras

    # --- edgerl additions ---------------------------------------------------------------------
    def expert_action(self) -> torch.Tensor:
        return (-(self._error(self.state) @ self._lqr)).clamp(-1.0, 1.0)[:, None]

    def expert_chunk(self, horizon: int, env_ids: torch.Tensor | None = None) -> torch.Tensor:
        """LQR actions along the (randomized) model rolled forward ``horizon`` steps."""
        state = self.state if env_ids is None else self.state[env_ids]
        rows = []
        for _ in range(int(horizon)):
            a = (-(self._error(state, env_ids) @ self._lqr)).clamp(-1.0, 1.0)
            rows.append(a)
            state = self._physics(state, a, env_ids)
        return torch.stack(rows, dim=1)[..., None]

    def raw_physics_steps_per_s(self, num_envs: int, steps: int) -> float:
        state = torch.zeros(num_envs, 4, device=self.device)
        force = torch.zeros(num_envs, device=self.device)
        state = cartpole_dynamics(state, force, self.cfg)  # warm-up
        start = time.perf_counter()
        for _ in range(steps):
            state = cartpole_dynamics(state, force, self.cfg)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return num_envs * steps / (time.perf_counter() - start)


def make_cartpole(num_envs: int = 64, device: str | torch.device = "cpu", seed: int = 0,
                  **cfg_kwargs: object) -> CartpoleEnv:
    """Registry factory: ``make_task("cartpole", num_envs=..., device=..., seed=..., **cfg)``."""
    return CartpoleEnv(num_envs=num_envs, device=device, seed=seed, cfg=CartpoleCfg(**cfg_kwargs))


#: ``cartpole_goal``'s defaults: a goal within 1 m, 3 s episodes to reach it.
CARTPOLE_GOAL_DEFAULTS: dict[str, object] = {"goal_range": 1.0, "max_episode_steps": 150}


def make_cartpole_goal(num_envs: int = 64, device: str | torch.device = "cpu", seed: int = 0,
                       **cfg_kwargs: object) -> CartpoleEnv:
    """Registry factory of ``cartpole_goal``: :data:`CARTPOLE_GOAL_DEFAULTS`, then ``cfg``."""
    return make_cartpole(num_envs, device, seed, **{**CARTPOLE_GOAL_DEFAULTS, **cfg_kwargs})
