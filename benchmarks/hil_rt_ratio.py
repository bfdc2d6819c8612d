"""``edgerl hil --rt-priority`` command round trip against ``edgerl bench serial``, interleaved.

Each run is one pair, back to back on the same machine: ``edgerl bench serial --rt-priority P``
(the link's ping-pong floor, its own firmware process) then ``edgerl hil --rt-priority P``
(the plant, the controller and the serial link together, which also probes its own link after
the episodes: ``rtt_p99_vs_link``). Printed per run (one JSON line, with the 1-minute load
average before it): both p99s, ``ratio`` = hil ``cmd_rtt_p99_us`` / bench ``cmd_rtt_p99_us``,
``rt_granted``; then a summary line with how many runs met ``ratio <= 2``.

    .venv/bin/python benchmarks/hil_rt_ratio.py [--runs 5] [--rt-priority 10] [--target host]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["main", "pair"]


def _edgerl(argv: list[str]) -> dict:
    proc = subprocess.run([sys.executable, "-m", "edgerl", *argv, "--json"],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"edgerl {' '.join(argv)} exited {proc.returncode}: "
                           f"{proc.stderr[-1500:]}")
    return json.loads(proc.stdout)


def pair(rt_priority: int, count: int, episodes: int, target: str, max_steps: int) -> dict:
    """One bench-serial + hil pair; returns the numbers and the ratio."""
    load = os.getloadavg()[0]
    bench = _edgerl(["bench", "serial", "--count", str(count), "--watchdog-trials", "0",
                     "--rt-priority", str(rt_priority)])
    hil = _edgerl(["hil", "--episodes", str(episodes), "--max-steps", str(max_steps),
                   "--no-estop-check", "--target", target, "--rt-priority", str(rt_priority)])
    ratio = hil["cmd_rtt_p99_us"] / bench["cmd_rtt_p99_us"]
    return {"load1": round(load, 2), "target": target, "rt_priority": rt_priority,
            "rt_granted": hil.get("rt_granted"), "gc_frozen": hil.get("gc_frozen"),
            "bench_p50_us": round(bench["cmd_rtt_p50_us"], 1),
            "bench_p99_us": round(bench["cmd_rtt_p99_us"], 1),
            "hil_p50_us": round(hil["cmd_rtt_p50_us"], 1),
            "hil_p99_us": round(hil["cmd_rtt_p99_us"], 1), "hil_rtt_samples": hil["rtt_samples"],
            "hil_link_p99_us": round(hil.get("link_rtt_p99_us") or float("nan"), 1),
            "rtt_p99_vs_link": hil.get("rtt_p99_vs_link"), "ratio": round(ratio, 3),
            "met_2x": ratio <= 2.0}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--rt-priority", type=int, default=10)
    p.add_argument("--count", type=int, default=2000, help="bench serial round trips")
    p.add_argument("--episodes", type=int, default=2)
    p.add_argument("--max-steps", type=int, default=250, help="hil steps per episode")
    p.add_argument("--target", choices=("host", "qemu-m4"), default="host")
    args = p.parse_args(argv)
    rows = []
    for i in range(args.runs):
        row = {"run": i + 1, **pair(args.rt_priority, args.count, args.episodes, args.target,
                                    args.max_steps)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    met = sum(r["met_2x"] for r in rows)
    print(json.dumps({"summary": f"{met} of {len(rows)} runs with hil p99 <= 2x bench serial "
                                 "p99", "met": met, "runs": len(rows),
                      "ratios": [r["ratio"] for r in rows],
                      "loads": [r["load1"] for r in rows]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
