"""Bundles for the ROS 2 tests and the ROS 2 benchmark: the MLP bundle writer
(:mod:`tests.helpers.bundles`) with the manifest switched to a sim task's names, limits
and rate, so the sim robot, planner and edit loop agree.

Run as a module from the repo root to write one:
``.venv/bin/python -m tests.helpers.task_bundles OUT_DIR``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from edgerl.contract.spec import PolicySpec, sha256_file
from tests.helpers.bundles import write_mlp_bundle


def write_task_bundle(path: Path, task: str = "cartpole", *, residual_bound: float = 0.05,
                      horizon: int = 10, period_s: float = 0.05, **kw) -> Path:
    """An edit-method MLP bundle whose manifest matches ``task`` (names, limits, rate)."""
    from edgerl.sim.registry import make_task

    env = make_task(task, num_envs=1, device="cpu")
    ts = env.spec
    env.close()
    write_mlp_bundle(path, obs_dim=ts.obs_dim, action_dim=ts.action_dim,
                     control_hz=ts.control_hz, horizon=horizon, period_s=period_s,
                     residual_bound=residual_bound, hidden=(32, 32), **kw)
    data = PolicySpec.load(path).to_dict()
    data["task"] = ts.name
    data["observation"]["names"] = list(ts.obs_names)
    data["observation"]["units"] = list(ts.obs_units)
    data["action"].update(names=list(ts.action_names), units=list(ts.action_units),
                          low=list(ts.action_low), high=list(ts.action_high))
    spec = PolicySpec.from_dict(data)
    spec.files = {f.name: sha256_file(f) for f in sorted(path.iterdir())
                  if f.name != "manifest.json"}
    spec.save(path)
    return path


if __name__ == "__main__":
    print(write_task_bundle(Path(sys.argv[1] if len(sys.argv) > 1 else "cartpole_bundle")))
