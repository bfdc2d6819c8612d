"""MuJoCo Warp (GPU) batch: ``num_envs`` worlds of one model, used for raw throughput only.

Needs the optional ``mujoco_warp`` package (and a CUDA GPU for speed); the CPU backends are
:class:`~edgerl.sim.mujoco.backends.MujocoBatch`.
"""

from __future__ import annotations

import mujoco

from edgerl.sim.mujoco.backends import BACKENDS

__all__ = ["WarpBatch"]


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
