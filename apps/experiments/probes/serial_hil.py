"""Serial / HIL numbers for docs/benchmarks.md (section "Serial / HIL").

Runs ``edgerl bench serial`` (plain and, where permitted, SCHED_FIFO) and the three
``edgerl hil`` fault rows quoted there, printing one JSON object per command with the
1-minute load average before it.

Usage: ``python -m edgerl.apps.experiments.probes.serial_hil [--count 5000] [--skip-rt]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from edgerl.apps.experiments.probes import EDGERL

HIL_ROWS = (("corrupt=0.01,seed=0", 5), ("freeze=1.0,unplug=2.5:0.3,seed=0", 2),
            ("drop=0.001,garbage=2,corrupt_rx=0.001,seed=0", 2))
HIL_KEYS = ("success", "episodes", "cmd_rtt_p50_us", "cmd_rtt_p99_us", "bad_frames",
            "lost_frames", "watchdog_trips", "estop_ok", "corrupted_executed", "fw_bad_frames",
            "host_bad_frames", "safe_entry_ms", "fw_safe_entry_us", "injected")


def run(argv: list[str], keys: tuple[str, ...] | None = None) -> int:
    load = os.getloadavg()[0]
    proc = subprocess.run([*EDGERL, *argv, "--json"], capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr, file=sys.stderr)
        return proc.returncode
    out = json.loads(proc.stdout)
    if keys:
        out = {k: out[k] for k in keys}
    print(json.dumps({"command": "edgerl " + " ".join(argv) + " --json", "load1": load, **out}))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--skip-rt", action="store_true", help="skip the SCHED_FIFO round trips")
    args = ap.parse_args()
    rc = run(["bench", "serial", "--count", str(args.count)])
    if not args.skip_rt:
        rc |= run(["bench", "serial", "--count", str(args.count), "--rt-priority", "10"])
    for faults, episodes in HIL_ROWS:
        rc |= run(["hil", "--episodes", str(episodes), "--faults", faults], HIL_KEYS)
    return rc


if __name__ == "__main__":
    sys.exit(main())
