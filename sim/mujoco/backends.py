"""Batched MuJoCo stepping on CPU: one model, ``num_envs`` simulations, state as numpy rows.

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
(:meth:`MujocoBatch.param` raises). MuJoCo Warp (GPU) is
:class:`~edgerl.sim.mujoco.warp.WarpBatch`, used for the raw throughput figure only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mujoco
import numpy as np

__all__ = ["ASSETS_DIR", "BACKENDS", "MujocoBatch", "load_model"]

#: Folder of the MJCF files shipped with edgerl.
ASSETS_DIR = Path(__file__).resolve().parent.parent / "assets"
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
