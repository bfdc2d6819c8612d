"""The edit tick's cost in process, hot: ``EditLoop._step`` on a bundle, stepped by hand with
a fresh observation each tick and a new chunk every 20 ticks (no thread, no sleep, no
planner), beside the network alone (``backend.infer``), the Python + C calls one steady
tick makes (``sys.setprofile``; ufuncs are not counted) and the input guard's check of a
command (``InputGuard.check_command``: a composed node's robot checks every command). What
``bench loop`` measures on top of this is scheduling and cold caches.

Usage: python -m edgerl.apps.experiments.probes.tick_cost BUNDLE [--ticks N] [--rate HZ] [--json]
(run it against another checkout with EDGERL_ROOT=<checkout> and the shim on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundle", type=Path)
    p.add_argument("--ticks", type=int, default=20000)
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    import edgerl
    from edgerl.contract.chunk import ActionChunk
    from edgerl.runtime.deployment import Deployment
    from edgerl.runtime.edit_loop import LoopConfig

    dep = Deployment.from_bundle(args.bundle, loop_cfg=LoopConfig(rate_hz=args.rate),
                                 planner="none")
    loop, net, spec = dep.loop, dep.backend, dep.spec
    rows = np.random.default_rng(0).uniform(-0.5, 0.5, (spec.chunk.horizon, spec.action.dim))
    rows = rows.astype(np.float32)
    obs = np.zeros(spec.observation.dim, np.float32)
    t = time.perf_counter()

    def step(n: int, out: np.ndarray | None = None) -> None:
        nonlocal t
        for i in range(n):
            t += loop.period
            if i % 20 == 0:
                dep.buffer.push(ActionChunk(actions=rows, t0=t, dt=spec.chunk.dt_s, obs_time=t),
                                now=t)
            obs[0] = np.float32(i % 7) * 0.01
            loop.obs.write(obs, t)
            s = time.perf_counter()
            loop._step(t, False)
            if out is not None:
                out[i] = time.perf_counter() - s

    step(2000)
    step_s = np.empty(args.ticks)
    step(args.ticks, step_s)
    infer_s = np.empty(args.ticks)
    for i in range(args.ticks):
        s = time.perf_counter()
        net.infer()
        infer_s[i] = time.perf_counter() - s
    t += loop.period  # one more steady tick (same chunk), profiled alone
    loop.obs.write(obs, t)
    calls = []
    sys.setprofile(lambda f, ev, a: calls.append(ev) if ev in ("call", "c_call") else None)
    try:
        loop._step(t, False)
    finally:
        sys.setprofile(None)
    from edgerl.runtime.input_guard import InputGuard

    guard, now = InputGuard(spec), time.time()
    g = np.empty(args.ticks)
    for i in range(args.ticks):
        s = time.perf_counter()
        guard.check_command(loop.command, now, now)
        g[i] = time.perf_counter() - s
    us = {f"step_p{q}_us": round(float(np.percentile(step_s, q)) * 1e6, 1) for q in (50, 90)}
    us.update({f"infer_p{q}_us": round(float(np.percentile(infer_s, q)) * 1e6, 1)
               for q in (50, 90)})
    us["guard_p50_us"] = round(float(np.percentile(g, 50)) * 1e6, 1)
    out = {"code": str(Path(edgerl.__file__).parent.parent), "state": loop.state,
           "calls_per_tick": len(calls) - 1, **us,  # - 1: the setprofile(None) call
           "load": [round(x, 2) for x in __import__("os").getloadavg()]}
    print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
