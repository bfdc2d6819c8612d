"""Time to 0.95 training success: today's configuration and the tuned task defaults, one run.

For each task and seed, trains ``nodelay`` with :data:`edgerl.policies.task_defaults.BASELINE`
(64 envs x 32 steps, lr 1e-3, 4 minibatches, 5 epochs: the configuration before tuning) and
then with the task's tuned CPU defaults, back to back, until the training success rate (last
100 episodes) reaches 0.95; prints wall and process-CPU seconds of the training loop and the
speed-ups (median over seeds), with the load average (docs/benchmarks.md quotes it).

    python -m edgerl.apps.experiments.probes.time_to_solve --tasks cartpole --seeds 0,1,2
    python -m edgerl.apps.experiments.probes.time_to_solve --tasks ball_balance --seeds 0 --json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", default="cartpole,ball_balance")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--iterations", type=int, default=200,
                    help="budget in iterations of the reference's batch (default 200)")
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import torch

    from edgerl.apps.cli.output import print_json, print_table
    from edgerl.bench.train.solve_time import compare_solve

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    torch.set_num_threads(1)
    seeds = [int(s) for s in args.seeds.split(",") if s]
    rows = []
    for task in [t for t in args.tasks.split(",") if t]:
        load = [round(x, 2) for x in os.getloadavg()]
        row = compare_solve(task, seeds, iterations=args.iterations, target=args.target)
        row["load_before"], row["load_after"] = load, [round(x, 2) for x in os.getloadavg()]
        rows.append(row)
    if args.json:
        print_json(rows)
    else:
        keys = ("task", "reference_time_s", "tuned_time_s", "speedup", "reference_cpu_s",
                "tuned_cpu_s", "cpu_speedup", "reference_env_steps", "tuned_env_steps",
                "load_before", "load_after")
        print_table([{k: r[k] for k in keys} for r in rows],
                    title=f"time to {args.target} success: BASELINE vs tuned (seeds {seeds})")
        print(json.dumps([r["runs"] for r in rows]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
