"""Language-conditioned pushing with the planar arm in MuJoCo ("push the red block left").

Model: ``sim/assets/arm_push.xml`` -- the reach arm plus a finger that slides along z (down at
puck height / lifted clear) and three coloured pucks that slide on the table with viscous
damping; only fingertip and pucks collide. Each episode places the pucks around the arm and
draws an instruction (:mod:`edgerl.sim.tasks.arm_push_language`): a colour and a direction.
The goal is the named puck's start moved ``push_dist`` along the direction.

Observation (policy, 15): joint cos/sin, arm joint velocities, finger height, fingertip xy,
the three puck positions in colour order -- never the instruction or the goal. The critic
adds the goal and the instruction one-hot. Action: shoulder / elbow velocity (rad/s) and
finger height set-point (m, 0 = down, 0.04 = lifted).
Success: the named puck within ``success_tol`` of the goal (ends the episode).
Expert (privileged, stateless): lift, move behind the puck on the goal line, lower, push
toward the goal with a set-point that shrinks as the puck nears it.
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
from edgerl.sim.tasks.arm import _wrap, arm_fk, arm_ik
from edgerl.sim.tasks.arm_push_language import COLORS, DIRECTIONS, INSTRUCTIONS
from edgerl.sim.vec_env import TaskSpec

__all__ = ["ArmPushCfg", "ArmPushEnv", "make_arm_push"]

#: Puck radius and fingertip radius (m), finger lift range (m); see arm_push.xml.
PUCK_RADIUS, TIP_RADIUS, FINGER_UP = 0.025, 0.012, 0.04
_DIR_VECTORS = np.array(list(DIRECTIONS.values()))


@dataclass
class ArmPushCfg:
    """Configuration of :class:`ArmPushEnv`.

    Attributes:
        control_hz: Policy rate (Hz); must divide the 100 Hz physics rate.
        max_episode_steps: Episode limit in control steps.
        max_joint_vel: Joint velocity action limit (rad/s).
        push_dist: Distance the named puck must travel (m).
        success_tol: Puck-to-goal distance counted as done (m).
        puck_radius: (min, max) distance of the pucks from the shoulder at reset (m).
        expert_gain: Expert's joint-velocity gain (1/s).
        backend / nthread: :class:`~edgerl.sim.mujoco.backends.MujocoBatch` settings.
        randomization: Per-env mass / friction / damping / actuator gain.
    """

    control_hz: float = 50.0
    max_episode_steps: int = 250
    max_joint_vel: float = 3.0
    push_dist: float = 0.08
    success_tol: float = 0.02
    puck_radius: tuple[float, float] = (0.2, 0.32)
    expert_gain: float = 8.0
    backend: str = "batch"
    nthread: int = 2
    randomization: DomainRandConfig = field(default_factory=DomainRandConfig)

    def __post_init__(self) -> None:
        self.randomization = DomainRandConfig.coerce(self.randomization)
        lo, hi = self.puck_radius
        contact = PUCK_RADIUS + TIP_RADIUS
        # the fingertip's radius range over a push: behind the start or at the goal
        margin = max(contact + 0.015, self.push_dist - contact, contact - self.push_dist)
        if not (0.08 + margin <= lo <= hi <= 0.44 - margin):
            raise ValueError(f"arm_push: puck_radius {self.puck_radius} leaves no room to push "
                             f"{self.push_dist} m inside the arm's reach")


class ArmPushEnv(InstructedTaskEnv):
    """Vectorized language-conditioned pushing; ``{"policy": (N, 15), "critic": (N, 29)}``.

    Attributes:
        instruction_id: int64 (N,) index into ``spec.instructions`` (colour * 4 + direction).
        goal_xy: float64 (N, 2) goal of the named puck (m).
    """

    n_pucks = len(COLORS)
    _rand_fields = RAND_FIELDS

    def __init__(self, num_envs: int = 64, device: str | torch.device = "cpu", seed: int = 0,
                 cfg: ArmPushCfg | None = None) -> None:
        self.cfg = cfg or ArmPushCfg()
        model = load_model("arm_push.xml")
        self.substeps = control_substeps("arm_push", self.cfg.control_hz, model)
        v = self.cfg.max_joint_vel
        obs_names = (["cos_shoulder", "sin_shoulder", "cos_elbow", "sin_elbow",
                      "shoulder_vel", "elbow_vel", "finger_z", "tip_x", "tip_y"]
                     + [f"{c}_puck_{a}" for c in COLORS for a in "xy"])
        obs_units = ["1"] * 4 + ["rad/s"] * 2 + ["m"] * (3 + 2 * self.n_pucks)
        self.spec = TaskSpec(
            name="arm_push", obs_names=obs_names, obs_units=obs_units,
            action_names=["shoulder_vel_cmd", "elbow_vel_cmd", "finger_z_cmd"],
            action_units=["rad/s", "rad/s", "m"], action_low=[-v, -v, 0.0],
            action_high=[v, v, FINGER_UP], control_hz=self.cfg.control_hz,
            max_episode_steps=self.cfg.max_episode_steps, instructions=list(INSTRUCTIONS))
        self._init_task(model, num_envs, device, seed, self.cfg.backend, self.cfg.nthread)
        self._puck_base = np.stack([model.body(f"puck_{c}").pos[:2] for c in COLORS])  # (3, 2)
        self.instruction_id = np.zeros(self.num_envs, dtype=np.int64)
        self.goal_xy = np.zeros((self.num_envs, 2))
        self._goal_mocap = self.sim.field("mocap_pos")[:, 0]
        self._rows = np.arange(self.num_envs)
        self._eye = np.eye(len(self.spec.instructions), dtype=np.float32)
        self._geo: tuple[np.ndarray, np.ndarray] | None = None
        self.reset()

    # --- language (instruction / instruction_ids / set_instruction: InstructedTaskEnv) ---------
    def _instruction_changed(self, env_ids: np.ndarray) -> None:
        """After ``set_instruction``: the goal moves with the instruction (from the named
        puck's current position)."""
        self._set_goal(env_ids)

    # --- state helpers ------------------------------------------------------------------------
    def pucks(self) -> np.ndarray:
        """float64 (N, 3, 2) puck positions (m) in colour order."""
        return self.sim.qpos[:, 3:9].reshape(-1, self.n_pucks, 2) + self._puck_base[None]

    def _geometry(self) -> tuple[np.ndarray, np.ndarray]:
        """Fingertip (N, 2) and pucks (N, 3, 2) of this step, computed once (``_evaluate``
        fills the cache, ``_observe`` consumes it, a reset clears it)."""
        if self._geo is None:
            self._geo = (arm_fk(self.sim.qpos[:, :2]), self.pucks())
        return self._geo

    def _colour(self) -> np.ndarray:
        return self.instruction_id // len(DIRECTIONS)

    def _named_puck(self) -> np.ndarray:
        return self.pucks()[self._rows, self._colour()]

    def _set_goal(self, ids: np.ndarray) -> None:
        colour = self.instruction_id[ids] // len(DIRECTIONS)
        direction = _DIR_VECTORS[self.instruction_id[ids] % len(DIRECTIONS)]
        start = self.pucks()[ids, colour]
        self.goal_xy[ids] = start + self.cfg.push_dist * direction
        self._goal_mocap[ids, :2] = self.goal_xy[ids]

    # --- MujocoTaskEnv hooks ------------------------------------------------------------------
    def _reset_task(self, ids: np.ndarray) -> None:
        n, g = ids.size, self.generator
        u = torch.rand(n, 3 + 2 * self.n_pucks, generator=g, dtype=torch.float64).numpy()
        instr = torch.randint(0, len(self.spec.instructions), (n,), generator=g).numpy()
        lo, hi = self.cfg.puck_radius
        k = np.arange(self.n_pucks)[None]
        angle = ((u[:, 0:1] * 2 - 1) * np.pi + k * (2 * np.pi / self.n_pucks)
                 + (u[:, 3:6] - 0.5) * 0.6)
        radius = lo + (hi - lo) * u[:, 6:9]
        xy = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=-1)
        self.sim.qpos[ids, 3:9] = (xy - self._puck_base[None]).reshape(n, -1)
        self.sim.qpos[ids, 0] = (u[:, 1] * 2 - 1) * np.pi
        self.sim.qpos[ids, 1] = (u[:, 2] * 2 - 1) * 2.0
        self.sim.qpos[ids, 2] = FINGER_UP
        self.sim.ctrl[ids, 2] = FINGER_UP
        self.instruction_id[ids] = instr
        self._geo = None
        self._set_goal(ids)

    def _apply_action(self, act: np.ndarray) -> None:
        self.sim.ctrl[:] = act

    def _evaluate(self, act: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tip, pucks = self._geometry()
        puck = pucks[self._rows, self._colour()]
        dist = np.linalg.norm(puck - self.goal_xy, axis=-1)
        reach = np.linalg.norm(tip - puck, axis=-1)
        success = dist < self.cfg.success_tol
        v = self.cfg.max_joint_vel
        reward = (-2.0 * dist - 0.5 * reach - 0.01 * np.sum((act[:, :2] / v) ** 2, axis=-1)
                  + 5.0 * success)
        return reward, success, success

    def _observe(self) -> TensorDict:
        q, n, o = self.sim.qpos, self.num_envs, self.spec.obs_dim
        tip, pucks = self._geometry()
        self._geo = None
        policy = np.empty((n, o), dtype=np.float32)
        policy[:, 0:4:2] = np.cos(q[:, :2])
        policy[:, 1:4:2] = np.sin(q[:, :2])
        policy[:, 4:6] = self.sim.qvel[:, :2]
        policy[:, 6] = q[:, 2]
        policy[:, 7:9] = tip
        policy[:, 9:] = pucks.reshape(n, -1)
        n_inst = len(self.spec.instructions)
        critic = np.empty((n, o + 2 + n_inst), dtype=np.float32)
        critic[:, :o] = policy
        critic[:, o:o + 2] = self.goal_xy
        critic[:, o + 2:] = self._eye[self.instruction_id]
        return TensorDict({"policy": torch.from_numpy(policy).to(self.device),
                           "critic": torch.from_numpy(critic).to(self.device)},
                          batch_size=[n], device=self.device)

    def _expert(self) -> np.ndarray:
        q = self.sim.qpos
        tip, z = arm_fk(q[:, :2]), q[:, 2]
        puck = self._named_puck()
        to_goal = self.goal_xy - puck
        remaining = np.linalg.norm(to_goal, axis=-1, keepdims=True)
        fallback = _DIR_VECTORS[self.instruction_id % len(DIRECTIONS)]
        line = np.where(remaining > 1e-6, to_goal / np.maximum(remaining, 1e-9), fallback)
        contact = PUCK_RADIUS + TIP_RADIUS
        d = puck - tip
        along = np.sum(d * line, axis=-1)
        lateral = np.linalg.norm(d - along[:, None] * line, axis=-1)
        aligned = (along > contact - 0.012) & (along < contact + 0.03) & (lateral < 0.015)
        behind = puck - (contact + 0.015) * line
        at_behind = np.linalg.norm(tip - behind, axis=-1) < 0.01
        push = aligned & (z < 0.01)
        lower = ~push & at_behind
        travel = ~push & ~at_behind & (z > FINGER_UP - 0.005)
        # push: aim inside the puck by up to 2 cm, less as it nears the goal (slows it down)
        push_target = puck - (contact - np.minimum(remaining, 0.02)) * line
        target = np.where(push[:, None], push_target, np.where((lower | travel)[:, None],
                                                               behind, tip))
        sign = np.where(q[:, 1] >= 0.0, 1.0, -1.0)
        q_star = arm_ik(target, sign)
        err = np.stack([_wrap(q_star[:, 0] - q[:, 0]), q_star[:, 1] - q[:, 1]], axis=-1)
        joint = self.cfg.expert_gain * err
        joint[~(push | lower | travel)] = 0.0  # lifting: hold still
        finger = np.where(push | lower, 0.0, FINGER_UP)
        return np.concatenate([joint, finger[:, None]], axis=-1)


def make_arm_push(num_envs: int = 64, device: str | torch.device = "cpu", seed: int = 0,
                  **cfg_kwargs: object) -> ArmPushEnv:
    """Registry factory: ``make_task("arm_push", num_envs=..., device=..., seed=..., **cfg)``."""
    return ArmPushEnv(num_envs=num_envs, device=device, seed=seed,
                      cfg=ArmPushCfg(**cfg_kwargs))  # type: ignore[arg-type]
