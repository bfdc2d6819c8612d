"""Time to 0.95 training success of several candidate settings, interleaved per seed.

The grid behind the tuned CPU defaults (docs/benchmarks.md): for each seed, every candidate in
turn (so all see the same machine load), each trained ``nodelay`` until the training success
rate reaches the target; one JSON line per run (process CPU s, loop wall s, env steps,
iterations, the load average at its start) on stdout and appended to ``--out``.

A candidate is ``NAME=JSON`` (:func:`edgerl.bench.train.solve_time.candidate_config`):
``TaskDefaults`` fields (missing ones are BASELINE's), plus optional ``"ppo"`` (other
``PPOConfig`` fields, e.g. ``entropy_coef``) and ``"actor"`` (``ModelConfig`` fields, e.g.
``init_std``)::

    python -m edgerl.apps.experiments.probes.solve_time_grid --task ball_balance --seeds 1,2,0 \\
        base='{}' h64_g95='{"hidden_dims": [64, 64], "gamma": 0.95}' \\
        g95='{"gamma": 0.95}' h64_ent0='{"hidden_dims": [64, 64], "ppo": {"entropy_coef": 0}}'
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("candidates", nargs="+", metavar="NAME=JSON")
    ap.add_argument("--task", required=True)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--iterations", type=int, default=200,
                    help="budget in iterations of BASELINE's batch (default 200)")
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--out", default=None, help="also append the JSON lines to this file")
    args = ap.parse_args()
    cands = {}
    for item in args.candidates:
        name, sep, text = item.partition("=")
        if not sep or not name:
            ap.error(f"candidate {item!r}: expected NAME=JSON")
        try:
            cands[name] = json.loads(text)
        except json.JSONDecodeError as exc:
            ap.error(f"candidate {name}: bad JSON ({exc})")
    import torch

    from edgerl.bench.train.solve_time import candidate_config, time_to_success
    from edgerl.policies.task_defaults import BASELINE

    torch.set_num_threads(1)
    budget = args.iterations * BASELINE.num_envs * BASELINE.num_steps_per_env
    for seed in [int(s) for s in args.seeds.split(",") if s]:
        for name, spec in cands.items():
            load = round(os.getloadavg()[0], 2)
            cfg = candidate_config(args.task, seed, spec, budget)
            row = {"task": args.task, "name": name, "seed": seed, "load": load,
                   **time_to_success(cfg, args.target)}
            line = json.dumps(row)
            print(line, flush=True)
            if args.out:
                with open(args.out, "a") as fh:
                    fh.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
