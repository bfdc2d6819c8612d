"""Rerun the headline benchmarks quoted in docs/benchmarks.md (``make bench``).

Builds the benchmark bundle once (a cartpole ``edit`` policy: 60 PPO iterations, planner
delay 3 steps, exported with parity) under ``runs/bench/``, then prints the ratio of each path
to its limit measured in the same run (``edgerl bench ratios``: appends a line to
``docs/bench_history.jsonl`` and redraws ``docs/img/bench_trend.png``), then runs each
``edgerl bench`` target with ``--json`` and prints one summary table; the raw JSON of every
run goes to ``runs/bench/results.json``. The real-time loop benchmarks use ``--rt-priority 50``
(SCHED_FIFO; needs root or CAP_SYS_NICE) as docs/benchmarks.md does. The ratios include the
``hil/rtt_p99`` row (one HIL set on the host firmware, ~30 s; the loop and hil rows alone took
51 s at load 3.5, docs/benchmarks.md); the full-run estimate below predates that row.

    .venv/bin/python benchmarks/run_all.py            # full (about 3 minutes)
    .venv/bin/python benchmarks/run_all.py --quick    # short runs (about 1 minute)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EDGERL = [sys.executable, "-m", "edgerl.apps"]
OUT = ROOT / "runs" / "bench"


def run_json(args: list[str], timeout: float = 900.0) -> dict:
    """Run ``edgerl ARGS --json``; its stdout parsed (stderr passed through on failure)."""
    res = subprocess.run([*EDGERL, *args, "--json"], capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    if res.returncode != 0:
        sys.stderr.write(res.stderr[-3000:])
        raise SystemExit(f"benchmark failed (exit {res.returncode}): edgerl {' '.join(args)}")
    return json.loads(res.stdout)


def ensure_bundle() -> Path:
    """The cartpole edit bundle the loop benchmarks run (trained and exported once)."""
    run_dir, bundle = OUT / "edit_run", OUT / "bundle"
    if not (bundle / "manifest.json").is_file():
        OUT.mkdir(parents=True, exist_ok=True)
        subprocess.run([*EDGERL, "train", "cartpole", "--method", "edit", "--delay-steps", "3",
                        "--iterations", "60", "--out", str(run_dir), "--no-progress"],
                       check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        subprocess.run([*EDGERL, "export", str(run_dir), "--out", str(bundle)], check=True,
                       cwd=ROOT, stdout=subprocess.DEVNULL)
    return bundle


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short runs (smoke check)")
    ap.add_argument("--ratios-only", action="store_true",
                    help="only `edgerl bench ratios` (skip the absolute figures)")
    args = ap.parse_args()
    seconds = "5" if args.quick else "30"
    bundle = str(ensure_bundle())
    loop = ["--bundle", bundle, "--planner", "burn", "--planner-latency-ms", "70",
            "--planner-period-ms", "100", "--seconds", seconds, "--rt-priority", "50"]
    plan = [
        ("sim driving 4096 envs", ["bench", "sim", "--task", "driving", "--num-envs", "4096",
                                   "--threads", "1"], lambda r: (
            f"{r['steps_per_s'] / 1e6:.2f}M env-steps/s = policy-controlled agent-steps/s "
            f"({r['agent_steps_per_s'] / 1e6:.2f}M vehicle-steps/s, {r['agents_per_env']} "
            f"vehicles/env)", "floor 0.5M env-steps/s")),
        ("sim arm_reach 256 envs", ["bench", "sim", "--task", "arm_reach", "--num-envs", "256"],
         lambda r: (f"{r['steps_per_s'] / 1e3:.0f}k env-steps/s, "
                    f"{r['overhead_ratio_same_states']:.2f} x raw (same states), "
                    f"{r['overhead_ratio']:.2f} x raw from rest",
                    "floor 100k, 0.5 x raw")),
        ("sim ball_balance 256 envs", ["bench", "sim", "--task", "ball_balance", "--num-envs",
                                       "256"],
         lambda r: (f"{r['steps_per_s'] / 1e3:.1f}k env-steps/s, "
                    f"{r['overhead_ratio_same_states']:.2f} x raw (same states), "
                    f"{r['overhead_ratio']:.2f} x raw from rest",
                    "floor 0.5 x raw")),
        ("loop 1 kHz, planner thread", ["bench", "loop", *loop, "--rate", "1000"], lambda r: (
            f"compute p99 {r['tick_compute_p99_us']:.0f} us, jitter p99 "
            f"{r['jitter_p99_us']:.1f} us, misses {r['deadline_misses']}/{r['ticks']}",
            "150 us, 50 us, 0.1 %")),
        ("loop 500 Hz, planner process", ["bench", "loop", *loop, "--rate", "500",
                                          "--planner-process"], lambda r: (
            f"compute p99 {r['tick_compute_p99_us']:.0f} us, jitter p99 "
            f"{r['jitter_p99_us']:.1f} us, misses {r['deadline_misses']}/{r['ticks']}",
            "150 us, 50 us, 0.1 %")),
        ("serial pty round trip", ["bench", "serial", "--count", "1000" if args.quick else "5000",
                                   "--rt-priority", "10"], lambda r: (
            f"p50 {r['cmd_rtt_p50_us']:.0f} us, p99 {r['cmd_rtt_p99_us']:.0f} us", "p99 1 ms")),
        ("planner (language)", ["bench", "planner", "--requests", "50" if args.quick else "200"],
         lambda r: (f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, "
                    f"{r['throughput_rps']:.0f} req/s (loopback)", "report")),
    ]
    # every path as a ratio to its limit measured in the same run (edgerl bench ratios):
    # the table, one line appended to docs/bench_history.jsonl and the trend PNG
    ratio_args = ["bench", "ratios", "--bundle", bundle, "--rt-priority", "50",
                  "--history", str(ROOT / "docs" / "bench_history.jsonl"),
                  "--png", str(ROOT / "docs" / "img" / "bench_trend.png")]
    if args.quick:
        ratio_args += ["--sim-repeats", "5", "--train-iterations", "2",
                       "--train-repeats", "1", "--loop-seconds", "5", "--hil-episodes", "1",
                       "--ros2-seconds", "3"]
    subprocess.run([*EDGERL, *ratio_args], check=True, cwd=ROOT)
    if args.ratios_only:
        return 0
    rows, raw = [], {}
    for name, cmd, summarize in plan:
        t0 = time.perf_counter()
        result = run_json(cmd)
        raw[name] = result
        try:
            value, bound = summarize(result)
        except (KeyError, TypeError, ZeroDivisionError) as exc:
            value, bound = f"(see results.json: {exc!r})", ""
        rows.append({"benchmark": name, "result": value, "acceptance": bound,
                     "seconds": f"{time.perf_counter() - t0:.0f}"})
        print(f"{name}: {value}", file=sys.stderr)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(raw, indent=2) + "\n")
    from edgerl.apps.cli.output import print_table

    print_table(rows, title="edgerl benchmarks (raw JSON: runs/bench/results.json)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
