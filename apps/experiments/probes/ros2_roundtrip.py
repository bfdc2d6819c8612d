"""The transport floor under ``edgerl deploy``: a bare rclpy ``JointState`` round trip
between two processes (Fast DDS, loopback), paced like a control loop
(:mod:`edgerl_ros.roundtrip`; ``edgerl bench ratios`` uses it as the ``ros2/e2e_p99``
reference).

Usage: ``python -m edgerl.apps.experiments.probes.ros2_roundtrip [--n 1000] [--period-ms 5]
[--executor single|events] [--json]``
"""

from __future__ import annotations

import argparse
import json
import sys


def main() -> int:
    from edgerl_ros.roundtrip import EXECUTORS, measure

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000, help="round trips")
    ap.add_argument("--period-ms", type=float, default=5.0, help="pause between round trips")
    ap.add_argument("--executor", choices=EXECUTORS, default="single")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        out = measure(args.n, args.period_ms * 1e-3, args.executor)
    except (RuntimeError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(out))
    else:
        print(f"rclpy JointState round trip ({args.executor}, every {args.period_ms:g} ms): "
              f"p50 {out['rtt_p50_us']:.0f} us, p99 {out['rtt_p99_us']:.0f} us "
              f"(n={out['n']}, load {out['load1']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
