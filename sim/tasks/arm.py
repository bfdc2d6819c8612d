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
        self._kin: tuple[np.ndarray, np.ndarray] | None = None
        self._onehot = np.eye(self.n_targets, dtype=np.float32)
        self.instruction_id = np.zeros(self.num_envs, dtype=np.int64)
        self.targets = self.sim.field("mocap_pos")[:, :, :2]
        # per-episode constants, refreshed where they change (reset, set_instruction): the
        # goal as a complex number x + iy, and the critic's columns from the targets on
        # (targets, goal, instruction one-hot) in float32
        self._goal_c = np.zeros(self.num_envs, dtype=np.complex64)
        self._q32 = np.zeros((self.num_envs, 2), dtype=np.float32)  # kinematics' workspace
        self._const_cols = np.zeros((self.num_envs, 4 * self.n_targets - 2), dtype=np.float32)
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
        self._goal_c[ids] = goal[:, 0] + 1j * goal[:, 1]
        tail = self._const_cols[:, 2 * self.n_targets:]
        tail[ids, :2] = goal
        tail[ids, 2:] = self._onehot[self.instruction_id[ids]]
        self._kin = None

    def _apply_action(self, act: np.ndarray) -> None:
        self._ctrl[:] = act

    def _kinematics(self) -> tuple[np.ndarray, np.ndarray]:
        """The critic observation (N, 22) float32 with its kinematic columns filled -- (cos,
        sin) of the joint angles interleaved and the fingertip (m) -- and the fingertip's
        distance to the goal (N,) in metres; computed once per step (``_evaluate`` fills the
        cache, ``_observe`` completes and consumes it).

        The plane is complex: with ``e_k = exp(i q_k)`` the fingertip is
        ``e_1 (L1 + L2 e_2)``, and ``e`` stored as floats is the interleaved (cos, sin)
        layout, so the forward kinematics is two trig calls and three products written
        straight into the observation. It runs in single precision, the observation's
        (fingertip error ~1e-7 m): float32 trig is vectorized, float64's is not."""
        if self._kin is None:
            q = self._q32
            np.copyto(q, self._qpos, casting="same_kind")
            obs = np.empty((self.num_envs, self.spec.obs_dim + 2 + self.n_targets),
                           dtype=np.float32)
            e = obs[:, 0:4].view(np.complex64)  # (N, 2): e_1, e_2
            np.cos(q, out=e.real)
            np.sin(q, out=e.imag)
            tip_c = obs[:, 6:8].view(np.complex64)[:, 0]
            np.multiply(e[:, 1], LINK2, out=tip_c)
            tip_c += LINK1
            tip_c *= e[:, 0]
            self._kin = (obs, np.abs(tip_c - self._goal_c))
        return self._kin

    def _evaluate(self, act: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        dist = self._kinematics()[1]
        self._hold += 1
        self._hold *= dist < self.cfg.success_tol
        success = self._hold >= self.cfg.hold_steps
        # -dist - 0.01 |act / v|^2 + 5 success
        reward = np.einsum("ij,ij->i", act, act)
        reward *= -0.01 / self.cfg.max_joint_vel ** 2
        reward -= dist
        np.add(reward, 5.0, out=reward, where=success)
        return reward, success, success

    def _observe(self) -> TensorDict:
        critic, _ = self._kinematics()
        self._kin = None
        critic[:, 4:6] = self._qvel
        critic[:, 8:] = self._const_cols
        policy = np.ascontiguousarray(critic[:, :self.spec.obs_dim])
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
