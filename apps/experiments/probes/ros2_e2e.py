"""ROS 2 end-to-end numbers for docs/benchmarks.md: `edgerl deploy` of the cartpole graph
(sim robot + planner + edit policy, three processes over rclpy/Fast DDS) for 30 s.

Usage: ``python -m edgerl.apps.experiments.probes.ros2_e2e --bundle B [--duration 30] [--runs 1]``;
prints one JSON object per run (the deploy summary plus the 1-minute load average before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from edgerl.apps.experiments.probes import EDGERL


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bundle", type=Path, required=True,
                    help="a cartpole edit bundle (the quoted runs used the untrained test "
                         "bundle: python -m tests.helpers.task_bundles DIR)")
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--runs", type=int, default=1)
    args = ap.parse_args()
    bundle = args.bundle
    for _ in range(args.runs):
        load0 = os.getloadavg()[0]
        proc = subprocess.run([*EDGERL, "deploy", "--bundle", str(bundle), "--duration",
                               str(args.duration), "--json"], capture_output=True, text=True)
        if proc.returncode not in (0, 2):
            print(proc.stderr, file=sys.stderr)
            return proc.returncode
        out = json.loads(proc.stdout)
        keep = ("success", "cmd_rate_hz", "configured_rate_hz", "e2e_latency_p50_us",
                "e2e_latency_p99_us", "monitor_latency_p50_us", "monitor_latency_p99_us",
                "diagnostics_seen", "dropped_bad_msgs", "episodes", "successes",
                "edit_tick_compute_p99_us", "edit_deadline_misses", "robot_step_rate_hz",
                "edit_state_age_at_tick_p50_ms", "edit_state_age_at_tick_p99_ms")
        summary = {k: out[k] for k in keep}
        summary.update(load1_before=load0, load1_after=os.getloadavg()[0])
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
