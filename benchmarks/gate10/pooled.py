"""Pool the paired gate-vs-heuristic comparison over several HIL batches (issue #20, gate):
per gate seed and over all, the mean and standard error of the per-episode difference of net
return (return minus planning price), ``--policies A B``: A minus B, episode k against episode
k of the same plant seed and kick stream within each batch.

Usage (repo root)::

    python benchmarks/gate10/pooled.py runs/gate10_hil_f runs/gate10_hil_g --json-out OUT.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gate_hil_compare import episode_net_returns, mean_se


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("batches", type=Path, nargs="+", help="gate_hil_compare --out folders")
    p.add_argument("--policies", nargs=2, default=["gate:sample", "age:fast:12"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--json-out", type=Path)
    args = p.parse_args()
    a, b = (pol.replace(":", "_") for pol in args.policies)
    per_seed: dict[int, list[float]] = {s: [] for s in args.seeds}
    nets: dict[str, dict[int, list[float]]] = {a: {}, b: {}}
    for batch in args.batches:
        for s in args.seeds:
            runs = {pol: json.loads((batch / f"{s}_{pol}.json").read_text()) for pol in (a, b)}
            xa, xb = (episode_net_returns(runs[pol]) for pol in (a, b))
            per_seed[s] += [x - y for x, y in zip(xa, xb)]
            nets[a].setdefault(s, []).extend(xa)
            nets[b].setdefault(s, []).extend(xb)
    out = {"batches": [str(x) for x in args.batches], "policies": args.policies,
           "seeds": {s: mean_se(d) for s, d in per_seed.items()},
           "pooled": mean_se([x for d in per_seed.values() for x in d]),
           "net_return_mean": {pol: {s: sum(v) / len(v) for s, v in by_seed.items()}
                               for pol, by_seed in nets.items()}}
    print(f"{args.policies[0]} minus {args.policies[1]}, over {', '.join(out['batches'])}:")
    for s, d in out["seeds"].items():
        print(f"  seed {s}: {d['mean']:+.2f} +- {d['se']:.2f} ({d['n']} episodes; net return "
              f"{out['net_return_mean'][a][s]:.2f} vs {out['net_return_mean'][b][s]:.2f})")
    d = out["pooled"]
    print(f"  pooled: {d['mean']:+.2f} +- {d['se']:.2f} ({d['n']} episodes), "
          f"{d['mean'] / d['se']:.2f} standard errors")
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
