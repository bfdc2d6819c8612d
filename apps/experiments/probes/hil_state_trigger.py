"""Host commands per plant step and the command round trip of a state-triggered HIL loop.

A bundle whose manifest asks for the ``state`` trigger (the edit loop ticks on each new
observation) drives the cartpole plant through the host firmware on a pty (``run_hil``,
the bundle's edit policy over an LQR-hold planner: a small test network, not a trained one).
Printed per run (one JSON line, with the load before it): plant steps, setpoints sent (one
per host tick), ``setpoints_per_step``, the command round trip p50 / p99 and the link
probe's p99. Before the fix the loop ticked on every STATE echo of an unchanged plant state
(each tick's setpoint is echoed: a ping-pong inside each control period).

    python -m edgerl.apps.experiments.probes.hil_state_trigger --bundle B [--runs 3] \
        [--episodes 2] [--rt-priority 10]

(B: a bundle whose manifest asks for the state trigger; the quoted runs used the test helper
``tests/helpers/bundles.py::write_state_trigger_bundle``.)
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    from edgerl.hil.harness import HilConfig, run_hil

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", type=Path, required=True,
                   help="a bundle whose manifest asks for the state trigger")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--episodes", type=int, default=2, help="episodes per run")
    p.add_argument("--steps", type=int, default=100, help="plant steps per episode at most")
    p.add_argument("--rt-priority", type=int, default=10)
    args = p.parse_args(argv)
    bundle = args.bundle
    for i in range(args.runs):
        load = os.getloadavg()[0]
        res = run_hil(HilConfig(bundle=bundle, task="cartpole", episodes=args.episodes,
                                max_steps=args.steps,
                                check_estop=False, rt_priority=args.rt_priority)).as_dict()
        steps = max(res["steps"], 1)
        print(json.dumps({
            "run": i + 1, "load1": round(load, 2), "rt_granted": res.get("rt_granted"),
            "steps": res["steps"], "setpoints_sent": res["setpoints_sent"],
            "setpoints_per_step": round(res["setpoints_sent"] / steps, 3),
            "cmd_rtt_p50_us": round(res["cmd_rtt_p50_us"], 1),
            "cmd_rtt_p99_us": round(res["cmd_rtt_p99_us"], 1),
            "link_rtt_p99_us": round(res.get("link_rtt_p99_us") or float("nan"), 1)}),
            flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
