"""Pool the paired gate-vs-heuristic comparison over several HIL batch folders: per gate seed
and over all episodes, the mean and standard error of the per-episode difference of net
return (return minus planning price), ``--policies A B``: A minus B, episode k against episode
k of the same plant seed and kick stream within each batch; and the same across the gate seeds
(the seeds' mean differences: mean, standard error, t test), the reading a claim rests on.

Usage (repo root)::

    python -m edgerl.apps.experiments.probes.gate_pooled runs/gate10_hil_f runs/gate10_hil_g \
        [--json-out OUT.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from edgerl.apps.experiments.gate_analysis import paired_reading


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("batches", type=Path, nargs="+", help="the gate_paired driver's batch folders")
    p.add_argument("--policies", nargs=2, default=["gate:sample", "age:fast:12"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--json-out", type=Path)
    args = p.parse_args()
    a, b = args.policies
    runs = {(str(batch), s, pol): json.loads((batch / f"{s}_{pol.replace(':', '_')}.json")
                                             .read_text())
            for batch in args.batches for s in args.seeds for pol in (a, b)}
    r = paired_reading(runs, [str(x) for x in args.batches], args.seeds, a, b)
    print(f"{a} minus {b}, over {', '.join(map(str, args.batches))}:")
    for s, est in r.per_seed.items():
        print(f"  seed {s}: {est.mean:+.2f} +- {est.se:.2f} ({est.n} episodes)")
    print(f"  pooled over episodes: {r.pooled.mean:+.2f} +- {r.pooled.se:.2f} ({r.pooled.n} "
          f"episodes), {r.pooled_z:.2f} standard errors")
    print(f"  across gate seeds: {r.seed_level.diff.text(2, signed=True)}, "
          f"{r.seed_level.verdict()}")
    if args.json_out:
        args.json_out.write_text(json.dumps({
            "batches": [str(x) for x in args.batches], "policies": args.policies,
            "seeds": {s: vars(e) for s, e in r.per_seed.items()}, "pooled": vars(r.pooled),
            "seed_level": {**vars(r.seed_level.diff), "t": r.seed_level.t,
                           "p": r.seed_level.p}}, indent=1))


if __name__ == "__main__":
    main()
