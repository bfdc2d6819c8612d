"""The MuJoCo task base class: the MDP step of a vectorized task around a CPU batch.

:class:`MujocoTaskEnv` turns a :class:`~edgerl.sim.mujoco.backends.MujocoBatch` into an
:class:`~edgerl.sim.vec_env.EdgeVecEnv` (validated actions -> physics -> reward/termination ->
resets -> observations), applies domain randomization per env at reset and rolls the
scripted expert forward for planner chunks.
"""

from __future__ import annotations

import abc
from typing import Any

import mujoco
import numpy as np
import torch
from tensordict import TensorDict

from edgerl.sim.mujoco.backends import MujocoBatch
from edgerl.sim.mujoco.raw_rate import raw_steps_per_s
from edgerl.sim.randomization import DomainRandomizer
from edgerl.sim.vec_env import EdgeVecEnv

__all__ = ["RAND_FIELDS", "MujocoTaskEnv", "control_substeps"]


#: The usual :attr:`MujocoTaskEnv._rand_fields`: each randomization scale and the MjModel
#: fields (column or None = all) it multiplies.
RAND_FIELDS: dict[str, list[tuple[str, int | None]]] = {
    "mass_scale": [("body_mass", None), ("body_inertia", None)],
    "friction_scale": [("geom_friction", 0)],
    "damping_scale": [("dof_damping", None)],
    "actuator_gain": [("actuator_gainprm", 0)],
}


def control_substeps(task: str, control_hz: float, model: mujoco.MjModel) -> int:
    """Physics steps per control step of ``task`` at ``control_hz``; a ``ValueError`` naming
    ``task`` unless ``control_hz`` divides the model's physics rate."""
    steps = 1.0 / (control_hz * model.opt.timestep)
    if abs(steps - round(steps)) > 1e-9 or round(steps) < 1:
        raise ValueError(f"{task}: control_hz {control_hz} must divide the "
                         f"physics rate {1.0 / model.opt.timestep:g} Hz")
    return int(round(steps))



class MujocoTaskEnv(EdgeVecEnv):
    """Base of edgerl's MuJoCo tasks: the MDP step around a :class:`MujocoBatch`.

    ``step`` reads like the MDP: actions (validated by :class:`EdgeVecEnv`) -> ``_apply_action``
    -> ``substeps`` physics steps -> ``_transition`` (by default ``_evaluate``: reward,
    terminated, success; then time-outs) -> reset of finished envs -> ``_observe``. State and
    task buffers are numpy (float64 state rows, views); tensors are made at the boundary with
    ``torch.from_numpy`` and moved to ``device``. Subclasses set :attr:`spec`, :attr:`substeps`,
    :attr:`model` and implement the ``_``-prefixed hooks; randomization (``cfg.randomization``,
    a :class:`~edgerl.sim.randomization.DomainRandConfig`) is applied per env at reset through
    :meth:`MujocoBatch.param` on the fields named by ``_rand_fields``.
    """

    #: physics steps per control step
    substeps: int
    #: scale -> list of (MjModel field, column or None) it multiplies, per env at reset
    _rand_fields: dict[str, list[tuple[str, int | None]]] = {}
    #: True while :meth:`expert_chunk` rolls the simulation forward (no random disturbances)
    _in_lookahead: bool = False

    def _init_task(self, model: mujoco.MjModel, num_envs: int, device: str | torch.device,
                   seed: int, backend: str, nthread: int) -> None:
        if num_envs < 1:
            raise ValueError(f"{self.spec.name}: num_envs must be >= 1, got {num_envs}")
        self.model = model
        self.num_envs = int(num_envs)
        self.num_actions = self.spec.action_dim
        self.device = torch.device(device)
        self._on_cpu = self.device.type == "cpu"
        self.max_episode_length = self.spec.max_episode_steps
        self.backend = backend
        self.nthread = int(nthread)
        self.sim = MujocoBatch(model, self.num_envs, backend=backend, nthread=nthread)
        self._ep_len = np.zeros(self.num_envs, dtype=np.int64)
        self._act_shape = torch.Size((self.num_envs, self.num_actions))
        self._act_low = np.asarray(self.spec.action_low, dtype=np.float64)
        self._act_high = np.asarray(self.spec.action_high, dtype=np.float64)
        # step()'s clipped actions and its bounds at full shape (a broadcast bound costs 5x)
        self._act_buf = np.empty((self.num_envs, self.num_actions))
        self._act_low_full = np.tile(self._act_low, (self.num_envs, 1))
        self._act_high_full = np.tile(self._act_high, (self.num_envs, 1))
        self.seed(seed)
        self.randomizer = DomainRandomizer(self.cfg.randomization, self.num_envs, self.device)
        self._nominal: dict[str, np.ndarray] = {}
        if self.cfg.randomization.enabled:
            for fields_ in self._rand_fields.values():
                for name, _ in fields_:
                    self._nominal.setdefault(name, np.array(getattr(model, name)))
        # randomized fields that mj_setConst reads (masses): constants are recomputed per env
        self._const_fields = sorted(set(self._nominal) & set(mujoco.MjModel._setconst_inputs))

    # --- episode bookkeeping ------------------------------------------------------------------
    @property
    def episode_length_buf(self) -> torch.Tensor:
        """Shape: (num_envs,) int64 steps since reset (a copy; assign to change it)."""
        return torch.from_numpy(self._ep_len.copy()).to(self.device)

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self._ep_len[:] = torch.as_tensor(value).detach().cpu().numpy()

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        """A fresh torch tensor on ``device`` from a numpy array (copied; never a live view)."""
        out = torch.from_numpy(np.array(array))
        return out if self._on_cpu else out.to(self.device)

    # --- VecEnv -------------------------------------------------------------------------------
    def get_observations(self) -> TensorDict:
        return self._observe()

    def reset(self, env_ids: torch.Tensor | None = None) -> TensorDict:
        if env_ids is None:
            ids = np.arange(self.num_envs, dtype=np.int64)
        else:
            ids = torch.as_tensor(env_ids).detach().cpu().reshape(-1).numpy().astype(np.int64)
        if ids.size:
            self._reset_ids(ids)
        return self._observe()

    def _reset_ids(self, ids: np.ndarray) -> None:
        self.sim.reset(ids)
        self._ep_len[ids] = 0
        if self.cfg.randomization.enabled:
            self.randomizer.resample(torch.from_numpy(ids), self.generator)
            self._apply_randomization(ids)
        self._reset_task(ids)

    def _apply_randomization(self, ids: np.ndarray) -> None:
        for scale_name, fields_ in self._rand_fields.items():
            scale = getattr(self.randomizer, scale_name).cpu().numpy()[ids].astype(np.float64)
            for name, column in fields_:
                values = self.sim.param(name)
                nominal = self._nominal[name]
                extra = (1,) * (nominal.ndim - (0 if column is None else 1))
                if column is None:
                    values[ids] = nominal[None] * scale.reshape(-1, *extra)
                else:
                    values[ids, ..., column] = nominal[None, ..., column] * scale.reshape(-1,
                                                                                          *extra)
        if self._const_fields:
            self.sim.update_constants(ids)

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """:meth:`EdgeVecEnv.step` validating on the numpy side: the shape on the tensor, the
        finiteness on a float64 copy (the same :class:`ActionError`, state untouched), then a
        clip in place (fewer tensor ops per step: this overhead is the ratio to raw physics
        that ``edgerl bench sim`` reports). The copy is a buffer reused every step, which
        ``_step_np`` and the hooks only read."""
        if not isinstance(actions, torch.Tensor) or actions.shape != self._act_shape:
            self.check_actions(actions)  # raises
        act = actions.detach()
        if act.device.type != "cpu" or act.dtype not in (torch.float32, torch.float64):
            act = act.to("cpu", torch.float64)
        buf = self._act_buf
        np.copyto(buf, act.numpy())
        if not np.isfinite(buf).all():
            self.check_actions(actions)  # raises, naming the element
        np.maximum(buf, self._act_low_full, out=buf)
        np.minimum(buf, self._act_high_full, out=buf)
        return self._step_np(buf)

    def _step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        act = actions.detach().to("cpu", torch.float64).numpy()
        return self._step_np(np.clip(act, self._act_low, self._act_high))

    def _step_np(self, act: np.ndarray) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """One control step with clipped float64 actions (N, A)."""
        self._apply_action(act)
        self.sim.step(self.substeps)
        reward, success, time_outs, dones = self._transition(act)
        log: dict[str, float] = {}
        if dones.any():
            log[f"/{self.spec.name}/success_rate"] = (float(np.count_nonzero(success))
                                                      / int(np.count_nonzero(dones)))
            self._reset_ids(np.flatnonzero(dones))
        # time_outs, dones and the float32 reward are fresh arrays: shared, not copied
        fresh = torch.from_numpy if self._on_cpu else self._tensor
        extras: dict[str, Any] = {"time_outs": fresh(time_outs), "success": self._tensor(success),
                                  "log": log}
        return self._observe(), fresh(reward.astype(np.float32)), fresh(dones), extras

    def _transition(self, act: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                     np.ndarray]:
        """After physics, with the clipped actions (N, A): count the step and evaluate it.

        Returns fresh arrays ``(reward (N,), success (N,) bool, time_outs (N,) bool, dones (N,)
        bool)``. The default composes the hooks (``_evaluate``, the episode limit,
        ``_success_at_end``); a task may override it with one fused computation (arm_reach:
        :mod:`edgerl.sim.tasks.arm_kernels`)."""
        self._ep_len += 1
        reward, terminated, success = self._evaluate(act)
        time_outs = self._ep_len >= self.max_episode_length
        time_outs &= ~terminated
        success = self._success_at_end(success, terminated, time_outs)
        return reward, success, time_outs, terminated | time_outs

    # --- hooks --------------------------------------------------------------------------------
    @abc.abstractmethod
    def _reset_task(self, ids: np.ndarray) -> None:
        """Write initial state (qpos, mocap, ...) and task buffers for envs ``ids``."""

    @abc.abstractmethod
    def _apply_action(self, act: np.ndarray) -> None:
        """Write clipped actions float64 (N, A) into the simulation's controls."""

    def _evaluate(self, act: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """After physics: (reward float (N,), terminated bool (N,), success bool (N,)).
        Every task implements it unless it overrides :meth:`_transition`."""
        raise NotImplementedError(f"{type(self).__name__} implements neither _evaluate nor "
                                  "_transition")

    def _success_at_end(self, success: np.ndarray, terminated: np.ndarray,
                        time_outs: np.ndarray) -> np.ndarray:
        """Final success flags given the step's terminations (default: unchanged)."""
        return success

    @abc.abstractmethod
    def _observe(self) -> TensorDict:
        """Observations TensorDict (``"policy"`` (N, O), ``"critic"``)."""

    @abc.abstractmethod
    def _expert(self) -> np.ndarray:
        """Scripted expert action float64 (N, A) from the current state."""

    # --- edgerl additions ---------------------------------------------------------------------
    def expert_action(self) -> torch.Tensor:
        act = np.clip(self._expert(), self._act_low, self._act_high)
        return self._tensor(act.astype(np.float32))

    def expert_chunk(self, horizon: int, env_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Expert actions (n, horizon, A) float32 along the (randomized) simulation rolled
        forward ``horizon`` steps from the current state, which is then restored bitwise.

        The look-ahead is the planner's model: no resets and no random disturbances happen
        in it (the random stream is untouched), so a chunk cannot foresee a kick."""
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        ids = None if env_ids is None else torch.as_tensor(env_ids).cpu().reshape(-1).numpy()
        saved_state = self.sim.state.copy()
        saved_task = self._save_task_state()
        rows = []
        self._in_lookahead = True
        try:
            for _ in range(int(horizon)):
                # the expert is evaluated for every env (cheap numpy); only ``ids`` are stepped
                act = np.clip(self._expert(), self._act_low, self._act_high)
                rows.append(act if ids is None else act[ids])
                self._apply_action(act)
                self.sim.step(self.substeps, ids)
                self._advance_task_state()
        finally:
            self._in_lookahead = False
            self.sim.state[:] = saved_state
            self._restore_task_state(saved_task)
        return self._tensor(np.stack(rows, axis=1).astype(np.float32))

    def _save_task_state(self) -> Any:
        """Task buffers that :meth:`expert_chunk`'s look-ahead changes (default none)."""
        return None

    def _restore_task_state(self, saved: Any) -> None:
        return None

    def _advance_task_state(self) -> None:
        """Advance time-dependent task buffers (moving targets) one step in a look-ahead."""
        return None

    def raw_physics_steps_per_s(self, num_envs: int, steps: int) -> float:
        """Backend alone (same model, substeps, backend, threads; zero control, no task logic):
        control steps per second summed over envs."""
        return raw_steps_per_s(self.model, num_envs, steps, self.substeps,
                               backend=self.backend, nthread=self.nthread)

    def close(self) -> None:
        self.sim.close()
