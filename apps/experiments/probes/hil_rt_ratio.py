"""``edgerl hil --rt-priority`` command round trip against ``edgerl bench serial``, interleaved.

Each run is one set of :func:`edgerl.bench.hil.rt_ratio.pair` (paced ``bench serial --pace-hz R``,
back-to-back ``bench serial``, ``edgerl hil``, all at ``--rt-priority P`` on the same
``--target`` build). Printed per run: one JSON line (the p50 / p99s, ``ratio`` = hil p99 /
paced bench p99, ``ratio_b2b`` = hil p99 / back-to-back p99, ``host_ticks_per_step``,
``rt_granted``, ``other_rt``, the 1-minute load before it); then a summary line
(:func:`edgerl.bench.hil.rt_ratio.summarize`). ``edgerl bench ratios`` runs the same pairs as its
``hil/rtt_p99`` row.

    python -m edgerl.apps.experiments.probes.hil_rt_ratio [--runs 5] [--rt-priority 10] \
        [--target host]
"""

from __future__ import annotations

import argparse
import json

from edgerl.bench.hil.rt_ratio import pair, summarize


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--rt-priority", type=int, default=10)
    p.add_argument("--count", type=int, default=2000,
                   help="back-to-back bench serial round trips")
    p.add_argument("--pace-hz", type=float, default=50.0,
                   help="paced bench serial rate: the HIL task's control rate (cartpole 50)")
    p.add_argument("--paced-count", type=int, default=None,
                   help="paced round trips (default: episodes x max-steps, as the HIL)")
    p.add_argument("--episodes", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=250, help="hil steps per episode")
    p.add_argument("--target", choices=("host", "qemu-m4"), default="host")
    args = p.parse_args(argv)
    rows = []
    for i in range(args.runs):
        row = {"run": i + 1, **pair(args.rt_priority, args.count, args.episodes, args.target,
                                    args.max_steps, args.pace_hz, args.paced_count)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(json.dumps(summarize(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
