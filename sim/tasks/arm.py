"""Language-conditioned reaching with a planar 2-link arm in MuJoCo (edgerl's VLA task).

Model: ``sim/assets/arm_planar.xml`` -- shoulder and elbow hinges about z (links 0.25 m and
0.20 m), velocity-servo actuators, four coloured targets (mocap bodies, no contacts). Each
episode samples target positions, a random colour-to-slot layout and an instruction id; the
instruction "reach the <colour> target" (:mod:`edgerl.sim.tasks.arm_language`) names the goal.
The robot observation holds joint state, fingertip and *all* target positions in the fixed
colour order, never the instruction: the planner reads the instruction, the edit policy reads
the planner's chunk. The ``"critic"`` group adds the goal position and instruction one-hot.

Action: joint velocity commands (rad/s), clipped to ``[-max_joint_vel, max_joint_vel]``.
Success: the fingertip stays within ``success_tol`` of the named target for ``hold_steps``
consecutive control steps, which ends the episode. Expert (privileged): analytic inverse
kinematics to the goal, proportional joint-velocity command.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from tensordict import TensorDict

from edgerl.sim.mujoco.backends import load_model
from edgerl.sim.mujoco.instructed import InstructedTaskEnv
from edgerl.sim.mujoco.task_env import RAND_FIELDS, control_substeps
from edgerl.sim.randomization import DomainRandConfig
from edgerl.sim.tasks.arm_kernels import arm_reach_observe, arm_reach_transition
from edgerl.sim.tasks.arm_language import COLORS, INSTRUCTIONS
from edgerl.sim.vec_env import TaskSpec

__all__ = ["ArmReachCfg", "ArmReachEnv", "arm_fk", "arm_ik", "make_arm_reach"]

#: Link lengths (m), as in arm_planar.xml.
LINK1, LINK2 = 0.25, 0.20


@dataclass
class ArmReachCfg:
    """Configuration of :class:`ArmReachEnv`.

    Attributes:
        control_hz: Policy rate (Hz); the model's 50 Hz physics (20 ms) must be a multiple.
        max_episode_steps: Episode limit in control steps.
        max_joint_vel: Action limit (rad/s).
        success_tol: Fingertip-to-goal distance counted as reached (m).
        hold_steps: Consecutive steps within tolerance that make a success.
        target_radius: (min, max) distance of targets from the shoulder (m).
        expert_gain: Expert's joint-velocity gain (1/s).
        backend: :class:`~edgerl.sim.mujoco.backends.MujocoBatch` backend.
        nthread: Physics threads.
        randomization: Per-env mass / friction (unused: no contacts) / damping / actuator gain.
    """

    control_hz: float = 50.0
    max_episode_steps: int = 150
    max_joint_vel: float = 3.0
    success_tol: float = 0.03
    hold_steps: int = 5
    target_radius: tuple[float, float] = (0.15, 0.40)
    expert_gain: float = 8.0
    backend: str = "batch"
    nthread: int = 2
    randomization: DomainRandConfig = field(default_factory=DomainRandConfig)

    def __post_init__(self) -> None:
        self.randomization = DomainRandConfig.coerce(self.randomization)
        lo, hi = self.target_radius
        if not (abs(LINK1 - LINK2) < lo <= hi < LINK1 + LINK2):
            raise ValueError(f"arm_reach: target_radius {self.target_radius} must lie inside "
                             f"the workspace ({abs(LINK1 - LINK2):.2f}, {LINK1 + LINK2:.2f}) m")
        if self.max_episode_steps < 1 or self.hold_steps < 1:
            raise ValueError("arm_reach: max_episode_steps and hold_steps must be >= 1")


def arm_fk(q: np.ndarray) -> np.ndarray:
    """Fingertip position (..., 2) in metres from joint angles ``q`` (..., 2) in radians."""
    q1, q12 = q[..., 0], q[..., 0] + q[..., 1]
    return np.stack([LINK1 * np.cos(q1) + LINK2 * np.cos(q12),
                     LINK1 * np.sin(q1) + LINK2 * np.sin(q12)], axis=-1)


def arm_ik(goal: np.ndarray, elbow_sign: np.ndarray) -> np.ndarray:
    """Joint angles (..., 2) putting the fingertip at ``goal`` (..., 2); ``elbow_sign`` (...)
    = +1 / -1 picks the elbow branch. Out-of-reach goals give the closest pose."""
    r2 = np.sum(goal * goal, axis=-1)
    c2 = np.clip((r2 - LINK1 ** 2 - LINK2 ** 2) / (2 * LINK1 * LINK2), -1.0, 1.0)
    q2 = elbow_sign * np.arccos(c2)
    q1 = (np.arctan2(goal[..., 1], goal[..., 0])
          - np.arctan2(LINK2 * np.sin(q2), LINK1 + LINK2 * np.cos(q2)))
    return np.stack([q1, q2], axis=-1)


def _wrap(angle: np.ndarray) -> np.ndarray:
    return (angle + np.pi) % (2 * np.pi) - np.pi


class ArmReachEnv(InstructedTaskEnv):
    """Vectorized language-conditioned reaching; ``{"policy": (N, 16), "critic": (N, 22)}``.

    Attributes:
        instruction_id: int64 (N,) current instruction per env (index into ``spec.instructions``).
        targets: float64 (N, 4, 2) target xy (m) in colour order (live view of mocap state).
    """

    n_targets = len(COLORS)
    #: no contacts, so no friction scale
    _rand_fields = {k: v for k, v in RAND_FIELDS.items() if k != "friction_scale"}

    def __init__(self, num_envs: int = 64, device: str | torch.device = "cpu", seed: int = 0,
                 cfg: ArmReachCfg | None = None) -> None:
        self.cfg = cfg or ArmReachCfg()
        model = load_model("arm_planar.xml")
        self.substeps = control_substeps("arm_reach", self.cfg.control_hz, model)
        v = self.cfg.max_joint_vel
        obs_names = (["cos_shoulder", "sin_shoulder", "cos_elbow", "sin_elbow",
                      "shoulder_vel", "elbow_vel", "tip_x", "tip_y"]
                     + [f"{c}_target_{a}" for c in COLORS for a in "xy"])
        obs_units = ["1"] * 4 + ["rad/s"] * 2 + ["m"] * (2 + 2 * self.n_targets)
        self.spec = TaskSpec(
            name="arm_reach", obs_names=obs_names, obs_units=obs_units,
            action_names=["shoulder_vel_cmd", "elbow_vel_cmd"], action_units=["rad/s", "rad/s"],
            action_low=[-v, -v], action_high=[v, v], control_hz=self.cfg.control_hz,
            max_episode_steps=self.cfg.max_episode_steps, instructions=list(INSTRUCTIONS),
            # the targets come from a camera and the goal from the instruction: planner only
            planner_only=[f"{c}_target_{a}" for c in COLORS for a in "xy"])
        self._init_task(model, num_envs, device, seed, self.cfg.backend, self.cfg.nthread)
        self._qpos, self._qvel, self._ctrl = self.sim.qpos, self.sim.qvel, self.sim.ctrl
        self._onehot = np.eye(self.n_targets, dtype=np.float32)
        self.instruction_id = np.zeros(self.num_envs, dtype=np.int64)
        self.targets = self.sim.field("mocap_pos")[:, :, :2]
        # per-episode constants, refreshed where they change (reset, set_instruction): the
        # goal (N, 2) float64, and the critic's columns from the targets on (targets, goal,
        # instruction one-hot) in float32
        self._goal = np.zeros((self.num_envs, 2))
        self._const_cols = np.zeros((self.num_envs, 4 * self.n_targets - 2), dtype=np.float32)
        # the (policy, critic) observation the last transition computed (None: recompute)
        self._obs: tuple[np.ndarray, np.ndarray] | None = None
        self._obs_width = self.spec.obs_dim + 2 + self.n_targets
        self._hold = np.zeros(self.num_envs, dtype=np.int64)
        self._rows = np.arange(self.num_envs)
        self.reset()

    # --- language (instruction / instruction_ids / set_instruction: InstructedTaskEnv) ---------
    def goal(self) -> np.ndarray:
        """float64 (N, 2) position of the instructed target (m)."""
        return self.targets[self._rows, self.instruction_id]

    # --- MujocoTaskEnv hooks ------------------------------------------------------------------
    def _reset_task(self, ids: np.ndarray) -> None:
        n = ids.size
        g = self.generator
        u = torch.rand(n, 8, generator=g, dtype=torch.float64).numpy()
        slots = torch.argsort(torch.rand(n, self.n_targets, generator=g), dim=1).numpy()
        instr = torch.randint(0, self.n_targets, (n,), generator=g).numpy()
        lo, hi = self.cfg.target_radius
        # slot k sits near angle phi0 + k*pi/2 (spread keeps targets >= ~8 cm apart)
        phi0 = (u[:, 0:1] * 2.0 - 1.0) * np.pi
        k = np.arange(self.n_targets)[None]
        jitter = (torch.rand(n, self.n_targets, generator=g, dtype=torch.float64).numpy()
                  - 0.5) * 1.0
        radius = lo + (hi - lo) * torch.rand(n, self.n_targets, generator=g,
                                             dtype=torch.float64).numpy()
        angle = phi0 + k * (np.pi / 2) + jitter
        xy = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=-1)  # (n, slot, 2)
        self.targets[ids] = np.take_along_axis(xy, slots[..., None], axis=1)
        q = np.stack([(u[:, 1] * 2.0 - 1.0) * np.pi, (u[:, 2] * 2.0 - 1.0) * 2.0], axis=-1)
        self.sim.qpos[ids] = q
        self.instruction_id[ids] = instr
        self._const_cols[ids, :2 * self.n_targets] = self.targets[ids].reshape(n, -1)
        self._refresh_goal(ids)
        self._hold[ids] = 0

    def _instruction_changed(self, env_ids: np.ndarray) -> None:
        self._refresh_goal(env_ids)

    def _refresh_goal(self, ids: np.ndarray) -> None:
        """Recompute the per-episode goal constants of envs ``ids`` from the targets and
        the instruction (the targets only move at reset)."""
        goal = self.goal()[ids]
        self._goal[ids] = goal
        tail = self._const_cols[:, 2 * self.n_targets:]
        tail[ids, :2] = goal
        tail[ids, 2:] = self._onehot[self.instruction_id[ids]]
        self._obs = None

    def _apply_action(self, act: np.ndarray) -> None:
        self._ctrl[:] = act

    def _transition(self, act: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                     np.ndarray]:
        """The post-physics step in one compiled call (:func:`arm_reach_transition`): reward
        ``-dist - 0.01 |act / v|^2 + 5 success`` (dist: fingertip to goal, m), success after
        ``hold_steps`` consecutive steps within ``success_tol`` (it terminates), time-outs,
        dones; the observation is kept for :meth:`_observe`."""
        n = self.num_envs
        policy, critic = self._empty_obs()
        reward = np.empty(n, dtype=np.float32)
        success, time_outs, dones = (np.empty(n, dtype=bool) for _ in range(3))
        cfg = self.cfg
        arm_reach_transition(self._qpos, self._qvel, act, self._goal, self._const_cols,
                             self._hold, self._ep_len, cfg.success_tol, cfg.hold_steps,
                             0.01 / cfg.max_joint_vel ** 2, 5.0, self.max_episode_length,
                             LINK1, LINK2, critic, policy, reward, success, time_outs, dones)
        self._obs = (policy, critic)
        return reward, success, time_outs, dones

    def _empty_obs(self) -> tuple[np.ndarray, np.ndarray]:
        """Fresh (policy (N, 16), critic (N, 22)) float32 buffers for the kernels to fill."""
        return (np.empty((self.num_envs, self.spec.obs_dim), dtype=np.float32),
                np.empty((self.num_envs, self._obs_width), dtype=np.float32))

    def _observe(self) -> TensorDict:
        obs, self._obs = self._obs, None  # a returned observation is never written again
        if obs is None:
            obs = self._empty_obs()
            arm_reach_observe(self._qpos, self._qvel, self._const_cols, obs[1], obs[0], LINK1,
                              LINK2)
        policy, critic = obs
        return TensorDict({"policy": torch.from_numpy(policy).to(self.device),
                           "critic": torch.from_numpy(critic).to(self.device)},
                          batch_size=[self.num_envs], device=self.device)

    def _expert(self) -> np.ndarray:
        q = self.sim.qpos
        sign = np.where(q[:, 1] >= 0.0, 1.0, -1.0)
        q_star = arm_ik(self.goal(), sign)
        err = np.stack([_wrap(q_star[:, 0] - q[:, 0]), q_star[:, 1] - q[:, 1]], axis=-1)
        return self.cfg.expert_gain * err

    def _save_task_state(self) -> np.ndarray:
        return self._hold.copy()

    def _restore_task_state(self, saved: np.ndarray) -> None:
        self._hold[:] = saved


def make_arm_reach(num_envs: int = 64, device: str | torch.device = "cpu", seed: int = 0,
                   **cfg_kwargs: object) -> ArmReachEnv:
    """Registry factory: ``make_task("arm_reach", num_envs=..., device=..., seed=..., **cfg)``."""
    return ArmReachEnv(num_envs=num_envs, device=device, seed=seed,
                       cfg=ArmReachCfg(**cfg_kwargs))  # type: ignore[arg-type]
