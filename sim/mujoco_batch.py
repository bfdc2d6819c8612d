"""Batched MuJoCo stepping: one model, ``num_envs`` simulations, state as numpy rows.

Every backend keeps each simulation's integration state (``mjSTATE_INTEGRATION``: time, qpos,
qvel, act, warmstart, ctrl, applied forces, mocap, ...) as one row of a float64 array of shape
``(num_envs, nstate)``; :meth:`MujocoBatch.field` returns live ``(num_envs, ...)`` numpy views
of a component (``qpos``, ``qvel``, ``ctrl``, ``mocap_pos``, ``xfrc_applied``...), so a task
reads and writes state without copies, and ``torch.from_numpy`` shares the memory.

Backends (``MujocoBatch(..., backend=...)``), measured in ``docs/benchmarks.md``:

- ``"batch"`` (default): ``mujoco.batch.Batch`` -- a persistent C++ thread pool (``nthread``)
  steps the rows in place; per-env model fields (``expand``) give domain randomization.
  Bit-identical at any thread count.
- ``"rollout"``: ``mujoco.rollout.Rollout`` with ``nthread`` persistent threads; the rows are
  copied in as initial states and the last recorded state is copied back (rollout does not
  return the solver warm-start, so it restarts from the step's initial warm-start).
- ``"loop"``: one ``MjData`` and a Python loop over envs (``mj_setState``/``mj_step``/
  ``mj_getState``) -- the baseline the others are compared with.

``"rollout"`` and ``"loop"`` share the batch's model, so they support no per-env parameters
(:meth:`MujocoBatch.param` raises). MuJoCo Warp (GPU) is :class:`WarpBatch`, used for the raw
throughput figure only; it needs the optional ``mujoco_warp`` package.

:class:`MujocoTaskEnv` is the base of edgerl's MuJoCo tasks (the MDP step around a batch);
``python -m edgerl.sim.mujoco_batch`` compares the backends on them (docs/benchmarks.md).
"""

from __future__ import annotations

import abc
import logging
import time
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import torch
from tensordict import TensorDict

from edgerl.sim.randomization import DomainRandomizer
from edgerl.sim.vec_env import EdgeVecEnv

__all__ = ["ASSETS_DIR", "BACKENDS", "RAND_FIELDS", "InstructedTaskEnv", "MujocoBatch",
           "MujocoTaskEnv", "WarpBatch", "control_substeps", "load_model", "raw_steps_per_s"]

log = logging.getLogger(__name__)

#: Folder of the MJCF files shipped with edgerl.
ASSETS_DIR = Path(__file__).resolve().parent / "assets"
#: CPU backends of :class:`MujocoBatch`.
BACKENDS = ("batch", "rollout", "loop")

_SPEC = mujoco.mjtState.mjSTATE_INTEGRATION
# the components of mjSTATE_INTEGRATION, in the order mj_getState lays them out
_COMPONENTS = {
    "time": mujoco.mjtState.mjSTATE_TIME,
    "qpos": mujoco.mjtState.mjSTATE_QPOS,
    "qvel": mujoco.mjtState.mjSTATE_QVEL,
    "act": mujoco.mjtState.mjSTATE_ACT,
    "history": mujoco.mjtState.mjSTATE_HISTORY,
    "qacc_warmstart": mujoco.mjtState.mjSTATE_WARMSTART,
    "ctrl": mujoco.mjtState.mjSTATE_CTRL,
    "qfrc_applied": mujoco.mjtState.mjSTATE_QFRC_APPLIED,
    "xfrc_applied": mujoco.mjtState.mjSTATE_XFRC_APPLIED,
    "eq_active": mujoco.mjtState.mjSTATE_EQ_ACTIVE,
    "mocap_pos": mujoco.mjtState.mjSTATE_MOCAP_POS,
    "mocap_quat": mujoco.mjtState.mjSTATE_MOCAP_QUAT,
    "userdata": mujoco.mjtState.mjSTATE_USERDATA,
    "plugin_state": mujoco.mjtState.mjSTATE_PLUGIN,
    "plastic": mujoco.mjtState.mjSTATE_PLASTIC,
}


def load_model(name_or_path: str | Path) -> mujoco.MjModel:
    """Compile an MJCF file: a name in :data:`ASSETS_DIR` (``"arm_planar.xml"``) or a path."""
    path = Path(name_or_path)
    if not path.is_absolute() and not path.exists():
        path = ASSETS_DIR / path
    if not path.is_file():
        shipped = ", ".join(sorted(p.name for p in ASSETS_DIR.glob("*.xml")))
        raise FileNotFoundError(f"MJCF file {name_or_path!s} not found (shipped: {shipped})")
    return mujoco.MjModel.from_xml_path(str(path))


def _component_offsets(model: mujoco.MjModel) -> dict[str, tuple[int, int]]:
    """name -> (offset, size) of each component inside an mjSTATE_INTEGRATION row."""
    out: dict[str, tuple[int, int]] = {}
    offset = 0
    for name, bit in _COMPONENTS.items():
        size = mujoco.mj_stateSize(model, bit)
        out[name] = (offset, size)
        offset += size
    if offset != mujoco.mj_stateSize(model, _SPEC):
        raise RuntimeError("mjSTATE_INTEGRATION layout differs from edgerl's component list")
    return out


class MujocoBatch:
    """``num_envs`` simulations of ``model`` stepped together on CPU threads.

    Args:
        model: The compiled model (shared; not modified).
        num_envs: Number of simulations N.
        backend: One of :data:`BACKENDS`.
        nthread: Worker threads (``"batch"`` / ``"rollout"``); 0 = all CPUs.

    Attributes:
        state: float64 (N, nstate) integration state rows (live; views below share it).
    """

    def __init__(self, model: mujoco.MjModel, num_envs: int, backend: str = "batch",
                 nthread: int = 2) -> None:
        if backend not in BACKENDS:
            hint = " (MuJoCo Warp is WarpBatch)" if backend == "warp" else ""
            raise ValueError(f"unknown MuJoCo backend {backend!r}; choose one of "
                             f"{', '.join(BACKENDS)}{hint}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        if nthread < 0:
            raise ValueError(f"nthread must be >= 0, got {nthread}")
        self.model = model
        self.num_envs = int(num_envs)
        self.backend = backend
        self.nthread = int(nthread)
        self._offsets = _component_offsets(model)
        self._views: dict[str, np.ndarray] = {}
        self._batch: Any = None
        self._rollout: Any = None
        self._closed = False
        data = mujoco.MjData(model)
        self._default_row = np.empty(mujoco.mj_stateSize(model, _SPEC))
        mujoco.mj_getState(model, data, self._default_row, _SPEC)
        if backend == "batch":
            import mujoco.batch as mj_batch

            self._batch = mj_batch.Batch(model, self.num_envs, nthread=self.nthread)
            self.state = self._batch.state
        else:
            self.state = np.tile(self._default_row, (self.num_envs, 1))
            if backend == "rollout":
                import mujoco.rollout as mj_rollout

                self._physics_idx = self._component_index(mujoco.mjtState.mjSTATE_FULLPHYSICS)
                self._user_idx = self._component_index(mujoco.mjtState.mjSTATE_USER)
                self._warm_idx = self._component_index(mujoco.mjtState.mjSTATE_WARMSTART)

                self._rollout = mj_rollout.Rollout(nthread=self.nthread)
                self._datas = [data] + [mujoco.MjData(model)
                                        for _ in range(max(self.nthread, 1) - 1)]
            else:
                self._datas = [data]

    def _component_index(self, spec: int) -> np.ndarray:
        """Column indices (in row order) of the components of ``spec`` inside a state row."""
        cols = [np.arange(off, off + size) for name, (off, size) in self._offsets.items()
                if int(_COMPONENTS[name]) & int(spec)]
        return np.concatenate(cols).astype(np.int64)

    # --- state access -------------------------------------------------------------------------
    def field(self, name: str) -> np.ndarray:
        """Live (N, ...) view of a state component, e.g. ``qpos`` (N, nq), ``mocap_pos``
        (N, nmocap, 3), ``xfrc_applied`` (N, nbody, 6); writes take effect at the next step."""
        view = self._views.get(name)
        if view is not None:
            return view
        if name not in self._offsets:
            raise KeyError(f"{name!r} is not a state component; known: "
                           f"{', '.join(self._offsets)}")
        offset, size = self._offsets[name]
        view = self.state[:, offset:offset + size]
        shape = getattr(mujoco.MjData(self.model), name).shape if name != "time" else ()
        view = view.reshape(self.num_envs, *shape) if shape else view[:, 0]
        if view.size and not np.shares_memory(view, self.state):  # a copy would drop writes
            raise RuntimeError(f"field {name!r} cannot be viewed without a copy")
        self._views[name] = view
        return view

    @property
    def qpos(self) -> np.ndarray:
        """(N, nq) joint positions (view)."""
        return self.field("qpos")

    @property
    def qvel(self) -> np.ndarray:
        """(N, nv) joint velocities (view)."""
        return self.field("qvel")

    @property
    def ctrl(self) -> np.ndarray:
        """(N, nu) actuator controls (view; held through the substeps of :meth:`step`)."""
        return self.field("ctrl")

    # --- per-env model parameters -------------------------------------------------------------
    def param(self, name: str) -> np.ndarray:
        """Writable per-env (N, ...) values of an MjModel field (``body_mass``,
        ``geom_friction``, ``dof_damping``, ``actuator_gainprm``...); ``"batch"`` only."""
        if self._batch is None:
            raise ValueError(f"per-env model parameters ({name}) need backend='batch', "
                             f"not {self.backend!r}")
        return self._batch.expand(name)

    def update_constants(self, env_ids: np.ndarray | None = None) -> None:
        """Recompute the derived model constants (``mj_setConst``: subtree masses, inverse
        weights...) of ``env_ids`` after writing per-env fields it reads (``body_mass``...)."""
        if self._batch is None:
            raise ValueError(f"per-env model constants need backend='batch', not "
                             f"{self.backend!r}")
        ids = None if env_ids is None else np.unique(np.asarray(env_ids, dtype=np.int64))
        self._batch.set_const(ids)

    # --- stepping -----------------------------------------------------------------------------
    def step(self, nsubsteps: int = 1, env_ids: np.ndarray | None = None) -> None:
        """Advance the simulations ``env_ids`` (all when ``None``) by ``nsubsteps`` calls to
        ``mj_step`` each, controls held.

        Raises ``mujoco.batch.SimulationError`` / ``ValueError`` if MuJoCo fails (e.g. NaN)."""
        if nsubsteps < 1:
            raise ValueError(f"nsubsteps must be >= 1, got {nsubsteps}")
        if self._closed:
            raise RuntimeError("MujocoBatch is closed")
        # each simulation is independent: step each listed one once, in index order
        ids = None if env_ids is None else np.unique(np.asarray(env_ids, dtype=np.int64))
        if ids is not None and ids.size == 0:
            return
        if self._batch is not None:
            self._batch.step(ids=ids, nstep=nsubsteps)
        elif self._rollout is not None:
            self._step_rollout(nsubsteps, slice(None) if ids is None else ids)
        else:
            self._step_loop(nsubsteps, range(self.num_envs) if ids is None else ids)

    def _step_rollout(self, nsubsteps: int, ids: slice | np.ndarray) -> None:
        # rollout takes mjSTATE_FULLPHYSICS rows and the mjSTATE_USER inputs (ctrl, mocap,
        # applied forces) as a control held over the substeps; it returns physics rows
        rows = self.state[ids]
        control = np.repeat(rows[:, None, self._user_idx], nsubsteps, axis=1)
        states, _ = self._rollout.rollout(
            self.model, self._datas, rows[:, self._physics_idx], control,
            control_spec=int(mujoco.mjtState.mjSTATE_USER), nstep=nsubsteps,
            initial_warmstart=rows[:, self._warm_idx])
        rows[:, self._physics_idx] = states[:, -1]
        self.state[ids] = rows

    def _step_loop(self, nsubsteps: int, ids: Any) -> None:
        model, data = self.model, self._datas[0]
        for i in ids:
            row = self.state[i]
            mujoco.mj_setState(model, data, row, _SPEC)
            for _ in range(nsubsteps):
                mujoco.mj_step(model, data)
            mujoco.mj_getState(model, data, row, _SPEC)

    def reset(self, env_ids: np.ndarray | None = None) -> None:
        """Put the given simulations (all when ``None``) in the model's default state
        (qpos0, zero velocity, zero controls); callers then write their initial state."""
        ids = slice(None) if env_ids is None else np.asarray(env_ids, dtype=np.int64)
        self.state[ids] = self._default_row

    def close(self) -> None:
        """Stop the worker threads (idempotent)."""
        if self._rollout is not None:
            self._rollout.close()
            self._rollout = None
        self._batch = None
        self._closed = True

    def __enter__(self) -> MujocoBatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WarpBatch:
    """``num_envs`` worlds of ``model`` on MuJoCo Warp (GPU; CPU through Warp is slow).

    Needs the optional ``mujoco_warp`` package; ``qpos``/``qvel``/``ctrl`` are torch views of
    the Warp arrays (shape (N, nq) etc.) on Warp's device.
    """

    def __init__(self, model: mujoco.MjModel, num_envs: int, nconmax: int | None = None,
                 njmax: int | None = None) -> None:
        try:
            import mujoco_warp as mjw
            import warp as wp
        except ImportError as exc:
            raise ImportError(
                "backend 'warp' needs MuJoCo Warp, which is not installed: "
                "pip install mujoco-warp (and a CUDA GPU for speed); CPU backends: "
                + ", ".join(BACKENDS)) from exc
        self._mjw, self._wp = mjw, wp
        self.model = model
        self.num_envs = int(num_envs)
        data = mujoco.MjData(model)
        mujoco.mj_forward(model, data)
        kwargs: dict[str, int] = {}
        if nconmax is not None:
            kwargs["nconmax"] = int(nconmax)
        if njmax is not None:
            kwargs["njmax"] = int(njmax)
        self._m = mjw.put_model(model)
        self._d = mjw.put_data(model, data, nworld=self.num_envs, **kwargs)
        self.qpos = wp.to_torch(self._d.qpos)
        self.qvel = wp.to_torch(self._d.qvel)
        self.ctrl = wp.to_torch(self._d.ctrl)

    def step(self, nsubsteps: int = 1) -> None:
        """Advance every world by ``nsubsteps`` physics steps."""
        for _ in range(nsubsteps):
            self._mjw.step(self._m, self._d)
        self._wp.synchronize()

    def close(self) -> None:
        """Nothing to release beyond Python references."""
        return None


def raw_steps_per_s(model: mujoco.MjModel, num_envs: int, steps: int, nsubsteps: int,
                    backend: str = "batch", nthread: int = 2, warmup: int = 5) -> float:
    """Backend-only throughput: control steps (each ``nsubsteps`` physics steps) per second
    summed over envs, with zero control and no task logic. Used as ``edgerl bench sim``'s
    ``raw_physics_steps_per_s`` so the task's overhead is a ratio."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    sim: MujocoBatch | WarpBatch
    sim = (WarpBatch(model, num_envs) if backend == "warp"
           else MujocoBatch(model, num_envs, backend=backend, nthread=nthread))
    try:
        for _ in range(warmup):
            sim.step(nsubsteps)
        start = time.perf_counter()
        for _ in range(steps):
            sim.step(nsubsteps)
        elapsed = time.perf_counter() - start
    finally:
        sim.close()
    return num_envs * steps / elapsed


# --- the shared vectorized-task base --------------------------------------------------------

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
    -> ``substeps`` physics steps -> ``_evaluate`` (reward, terminated, success) -> time-outs
    -> reset of finished envs -> ``_observe``. State and task buffers are numpy (float64 state
    rows, views); tensors are made at the boundary with ``torch.from_numpy`` and moved to
    ``device``. Subclasses set :attr:`spec`, :attr:`substeps`, :attr:`model` and implement the
    ``_``-prefixed hooks; randomization (``cfg.randomization``, a
    :class:`~edgerl.sim.randomization.DomainRandConfig`) is applied per env at reset through
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
        finiteness on its numpy view (the same :class:`ActionError`, state untouched), then one
        clip into float64 (fewer tensor ops per step: this overhead is the ratio to raw
        physics that ``edgerl bench sim`` reports)."""
        if not isinstance(actions, torch.Tensor) or actions.shape != self._act_shape:
            self.check_actions(actions)  # raises
        act = actions.detach()
        if act.device.type != "cpu" or act.dtype not in (torch.float32, torch.float64):
            act = act.to("cpu", torch.float64)
        act = act.numpy()
        if not np.isfinite(act).all():
            self.check_actions(actions)  # raises, naming the element
        return self._step_np(np.clip(act, self._act_low, self._act_high))

    def _step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        act = actions.detach().to("cpu", torch.float64).numpy()
        return self._step_np(np.clip(act, self._act_low, self._act_high))

    def _step_np(self, act: np.ndarray) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """One control step with clipped float64 actions (N, A)."""
        self._apply_action(act)
        self.sim.step(self.substeps)
        self._ep_len += 1
        reward, terminated, success = self._evaluate(act)
        time_outs = self._ep_len >= self.max_episode_length
        time_outs &= ~terminated
        success = self._success_at_end(success, terminated, time_outs)
        dones = terminated | time_outs
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

    # --- hooks --------------------------------------------------------------------------------
    @abc.abstractmethod
    def _reset_task(self, ids: np.ndarray) -> None:
        """Write initial state (qpos, mocap, ...) and task buffers for envs ``ids``."""

    @abc.abstractmethod
    def _apply_action(self, act: np.ndarray) -> None:
        """Write clipped actions float64 (N, A) into the simulation's controls."""

    @abc.abstractmethod
    def _evaluate(self, act: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """After physics: (reward float (N,), terminated bool (N,), success bool (N,))."""

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


class InstructedTaskEnv(MujocoTaskEnv):
    """A :class:`MujocoTaskEnv` with one instruction per env (``spec.instructions``).

    Subclasses keep :attr:`instruction_id` (int64 (N,), index into ``spec.instructions``)
    and may react to :meth:`set_instruction` in :meth:`_instruction_changed`.
    """

    instruction_id: np.ndarray

    def instruction(self, env_id: int) -> str:
        """The canonical instruction text of env ``env_id``."""
        return self.spec.instructions[int(self.instruction_id[int(env_id)])]

    def instruction_ids(self) -> torch.Tensor:
        """int64 (N,) instruction ids on ``device``."""
        return self._tensor(self.instruction_id)

    def set_instruction(self, env_ids: torch.Tensor | np.ndarray, ids: torch.Tensor | np.ndarray
                        ) -> None:
        """Override the instruction of ``env_ids`` (e.g. to evaluate one instruction)."""
        env_ids = np.asarray(torch.as_tensor(env_ids).cpu(), dtype=np.int64).reshape(-1)
        ids = np.asarray(torch.as_tensor(ids).cpu(), dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= len(self.spec.instructions)):
            raise ValueError(f"instruction ids must be in [0, {len(self.spec.instructions)}), "
                             f"got {ids.tolist()}")
        self.instruction_id[env_ids] = ids
        self._instruction_changed(env_ids)

    def _instruction_changed(self, env_ids: np.ndarray) -> None:
        """Hook after :meth:`set_instruction` wrote ``instruction_id[env_ids]`` (default none)."""
        return None


# --- backend comparison (python -m edgerl.sim.mujoco_batch) ---------------------------------


def measure_task(task: str, num_envs: int, steps: int, backend: str, nthread: int = 2,
                 repeats: int = 5) -> dict[str, Any]:
    """Full ``step`` rate (zero actions) and raw backend rate of a registered MuJoCo task,
    measured back to back ``repeats`` times; medians (rates in env-steps/s summed over envs,
    and the median of the per-pair ratios, which is robust to load from other processes)."""
    from edgerl.sim.registry import make_task

    env = make_task(task, num_envs=num_envs, seed=0, backend=backend, nthread=nthread)
    step_rates, raw_rates, ratios = [], [], []
    try:
        zeros = torch.zeros(num_envs, env.num_actions)
        for _ in range(5):
            env.step(zeros)
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(steps):
                env.step(zeros)
            step_rates.append(num_envs * steps / (time.perf_counter() - start))
            raw_rates.append(env.raw_physics_steps_per_s(num_envs, steps))
            ratios.append(step_rates[-1] / raw_rates[-1])
    finally:
        env.close()
    return {"task": task, "backend": backend, "num_envs": num_envs, "nthread": nthread,
            "steps_per_s": round(float(np.median(step_rates))),
            "raw_physics_steps_per_s": round(float(np.median(raw_rates))),
            "ratio": round(float(np.median(ratios)), 3),
            "best_steps_per_s": round(max(step_rates))}


def main(argv: list[str] | None = None) -> int:
    """Compare the CPU backends on edgerl's MuJoCo tasks (table, or ``--json``)."""
    import argparse

    from edgerl.logs import progress
    from edgerl.report import print_json, print_table

    p = argparse.ArgumentParser(prog="python -m edgerl.sim.mujoco_batch",
                                description=main.__doc__)
    p.add_argument("--tasks", default="arm_reach,ball_balance")
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--num-envs", type=int, default=256)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--nthread", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    from edgerl.sim.registry import list_tasks

    mujoco_tasks = [t.name for t in list_tasks() if t.backend == "mujoco"]
    for task in args.tasks.split(","):
        if task not in mujoco_tasks:
            p.error(f"unknown MuJoCo task {task!r}; known: {', '.join(mujoco_tasks)}")
    for backend in args.backends.split(","):
        if backend not in BACKENDS:
            p.error(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")
    if args.num_envs < 1 or args.steps < 1 or args.repeats < 1:
        p.error("--num-envs, --steps and --repeats must be >= 1")
    rows = []
    combos = [(t, b) for t in args.tasks.split(",") for b in args.backends.split(",")]
    for task, backend in progress(combos, total=len(combos), desc="measuring"):
        steps = args.steps if backend != "loop" else max(args.steps // 5, 1)
        rows.append(measure_task(task, args.num_envs, steps, backend, args.nthread,
                                 args.repeats))
    if args.json:
        print_json(rows)
    else:
        print_table(rows, title="MuJoCo backends (env-steps/s, medians of back-to-back pairs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
