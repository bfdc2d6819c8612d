"""Bring your own environment: gymnasium, Isaac Lab and mjlab envs as edgerl VecEnvs.

Each adapter turns a foreign env into something the latency wrappers, the trainer and the
exporter understand: an rsl_rl ``VecEnv`` with a :class:`edgerl.sim.vec_env.TaskSpec`
(observation/action names, limits, rate) that ends up in the bundle's ``manifest.json``.

* :mod:`edgerl.sim.adapters.gymnasium` -- any registered gymnasium env id (``gym:<EnvId>``).
* :mod:`edgerl.sim.adapters.rsl_rl_wrapper` -- Isaac Lab / mjlab ``RslRlVecEnvWrapper``.
* :mod:`edgerl.sim.adapters.expert` -- a trained PPO run as the task's expert.

Nothing here imports gymnasium, Isaac Lab or mjlab at package import time.
"""

from __future__ import annotations

__all__: list[str] = []
