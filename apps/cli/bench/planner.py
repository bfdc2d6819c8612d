"""``edgerl bench planner``: planner latency, local (onnxruntime in-process) and over loopback.

The measurement is :func:`edgerl.bench.planner.latency.measure_planner_latency` (local with
and without the instruction cache, loopback through a planner server; ``cpu_p50_ms`` is the
calling thread's CPU time per call). ``--json`` prints ``{"local": {...}, "local_cached":
{...}, "loopback": {...}, "p50_ms", "p99_ms", "throughput_rps"}`` (flat keys = loopback).
``--write-latency-model FILE`` writes the loopback latency as a ``LatencyModel`` (delay
distribution in control steps) for the sim wrappers.

``--load-test``: the planner service under attack: 48 robots (closed loop, a request every
100 ms) beside 16 hostile clients (idle, slowloris, oversized, malformed) that come and go in
``--window`` s windows, for ``--duration`` s (:mod:`edgerl.bench.planner.hostile_test`).
``--load-sweep``: open-loop Poisson load at ``--rates`` against a 5 ms planner with
deadline-aware admission and without (``admission=False``): offered load vs p99 (of the
requests that ran) and deadline-miss rate; ``--plot FILE`` draws it (PNG;
:mod:`edgerl.bench.planner.load_sweep`). Everything binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
from typing import Any

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

HELP = "planner latency: encoder + head locally and over loopback TCP (p50/p99, throughput)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    flags.add_bundle_flags(p, help="language planner bundle (default: an untrained head with the "
                                   "real encoder; latency does not depend on the head's weights)")
    p.add_argument("--requests", type=int, default=300, help="timed requests per mode")
    p.add_argument("--warmup", type=int, default=20, help="untimed requests first")
    flags.add_compute_flags(p, threads=(1, "onnxruntime threads per session"))
    p.add_argument("--control-hz", type=float, default=None,
                   help="control rate for the delay distribution (default: the bundle's)")
    load = p.add_argument_group("load on the planner server")
    load.add_argument("--load-test", action="store_true",
                      help="robots beside hostile clients on loopback (see --duration, --window)")
    load.add_argument("--load-sweep", action="store_true",
                      help="offered load vs p99 and deadline misses, admission vs unbounded")
    load.add_argument("--duration", type=float, default=60.0,
                      help="--load-test seconds (default 60)")
    load.add_argument("--window", type=float, default=2.0,
                      help="--load-test: hostile clients on for this long, then off (default 2 s)")
    load.add_argument("--rates", default="50,100,150,200,300,400",
                      help="--load-sweep offered loads, requests/s (comma separated)")
    load.add_argument("--point-s", type=float, default=5.0,
                      help="--load-sweep seconds per point and mode (default 5)")
    out = flags.add_output_flags(p, json="JSON for machines", latency_model="write the loopback "
                                 "latency as a LatencyModel JSON for the sim")
    out.add_argument("--plot", metavar="PNG", default=None, help="--load-sweep: write the plot")


def _rates(text: str) -> list[float]:
    """``--rates``: positive requests/s, comma separated."""
    try:
        rates = [float(r) for r in text.split(",")]
    except ValueError as exc:
        raise CliError(f"--rates must be numbers separated by commas, got {text!r}") from exc
    return rates


def _load(args: argparse.Namespace) -> dict[str, Any]:
    """``--load-test`` and / or ``--load-sweep``: their results by name."""
    from edgerl.bench.planner.hostile_test import hostile_load_test
    from edgerl.bench.planner.load_sweep import plot_sweep, sweep

    out: dict[str, Any] = {}
    if args.load_test:
        if not args.duration >= 4 * args.window > 0:
            raise CliError(f"--duration ({args.duration}) must cover at least 2 on/off cycles "
                           f"of --window ({args.window})")
        out["load_test"] = hostile_load_test(args.duration, args.window)
    if args.load_sweep:
        rates = _rates(args.rates)
        if not rates or min(rates) <= 0 or args.point_s <= 0:
            raise CliError("--rates must be positive and --point-s > 0")
        out["load_sweep"] = sweep(rates, args.point_s)
        if args.plot:
            plot_sweep(out["load_sweep"], args.plot)
    return out


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_json, print_table
    from edgerl.bench.planner.latency import PlannerLatencyConfig, measure_planner_latency

    if args.load_test or args.load_sweep:
        out = _load(args)
        if args.json:
            print_json(out)
        else:
            _print_load(out, print_table)
        return 0
    if args.requests < 10:
        raise CliError(f"--requests must be >= 10 for percentiles, got {args.requests}")
    out = measure_planner_latency(PlannerLatencyConfig(
        bundle=args.bundle, requests=args.requests, warmup=args.warmup, threads=args.threads,
        control_hz=args.control_hz,
        write_latency_model=str(args.write_latency_model) if args.write_latency_model else None))
    if args.json:
        print_json(out)
        return 0
    rows = [{"mode": k, **{c: out[k].get(c, "") for c in ("p50_ms", "p99_ms", "cpu_p50_ms",
                                                          "throughput_rps")}}
            for k in ("local", "local_cached", "loopback")]
    print_table(rows, title=f"edgerl bench planner ({out['bundle']})")
    if args.write_latency_model:
        print(f"latency model -> {args.write_latency_model}: P(D=k) = "
              f"{[round(p, 3) for p in out['latency_model']['delay_distribution']]}")
    return 0


def _print_load(out: dict[str, Any], print_table: Any) -> None:
    if "load_test" in out:
        lt = out["load_test"]
        rows = [{"robots": k, "requests": lt[k]["requests"], "p50_ms": lt[k]["p50_ms"],
                 "p99_ms": lt[k]["p99_ms"]} for k in ("without_hostile", "with_hostile")]
        print_table(rows, title=f"load test: {lt['clients']} clients, {lt['duration_s']:g} s")
        print(f"p99 ratio: median over windows {lt['window_p99_median_ratio']:.2f} "
              f"(limit 2.0), pooled {lt['p99_ratio']:.2f}; threads died: "
              f"{lt['threads_died']}; server internal errors: {lt['server_internal_errors']}")
    if "load_sweep" in out:
        rows = [{"admission": p["admission"], "offered_hz": p["offered_hz"],
                 "p99_ms": p["p99_ms"], "miss_rate": p["miss_rate"],
                 "outcomes": " ".join(f"{k}={v}" for k, v in sorted(p["outcomes"].items()))}
                for p in out["load_sweep"]["points"]]
        print_table(rows, title="load sweep (deadline 50 ms, planner 5 ms)")
