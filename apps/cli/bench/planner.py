"""``edgerl bench planner``: planner latency, local (onnxruntime in-process) and over loopback.

Local: ``OnnxLanguagePlanner.plan`` with the instruction cache off, so every call tokenizes,
runs the encoder and the head (what a VLA that re-reads its prompt costs), plus the cached
path (head only); ``cpu_p50_ms`` is the calling thread's CPU time per call (onnxruntime with
one thread computes on it), i.e. the latency an idle core would give. Loopback: a
:class:`PlannerServer` on 127.0.0.1 in this process (its own threads; onnxruntime releases
the GIL) answering a :class:`RemotePlanner`'s blocking ``plan`` calls back to back.
``throughput_rps`` is completed requests per wall second of that sequential loop. ``--json``
prints ``{"local": {...}, "local_cached": {...}, "loopback": {...}, "p50_ms", "p99_ms",
"throughput_rps"}`` (flat keys = loopback). ``--write-latency-model FILE`` writes the
loopback latency as a ``LatencyModel`` (delay distribution in control steps) for the sim
wrappers.

``--load-test``: the planner service under attack: 48 robots (closed loop, a request every
100 ms) beside 16 hostile clients (idle, slowloris, oversized, malformed) that come and go in
``--window``-second windows, against a :class:`SyntheticPlanner` (2 ms + 0.1 ms/row, batched);
prints the robots' p50/p99 with and without the hostile clients, their ratio, the server's
counters and whether any thread died. ``--load-sweep``: open-loop Poisson load at increasing
rates from 32 robots (deadline 50 ms) against a sequential 5 ms planner (capacity 200
requests/s), with deadline-aware admission and without (``admission=False``): offered load vs
p99 (of the requests that ran) and deadline-miss rate; ``--plot FILE`` draws it (PNG).
Everything binds 127.0.0.1.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.apps.cli.errors import CliError

HELP = "planner latency: encoder + head locally and over loopback TCP (p50/p99, throughput)"

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bundle", default=None,
                   help="language planner bundle (default: an untrained head with the real "
                        "encoder; latency does not depend on the head's weights)")
    p.add_argument("--requests", type=int, default=300, help="timed requests per mode")
    p.add_argument("--warmup", type=int, default=20, help="untimed requests first")
    p.add_argument("--threads", type=int, default=1, help="onnxruntime threads per session")
    p.add_argument("--control-hz", type=float, default=None,
                   help="control rate for the delay distribution (default: the bundle's)")
    p.add_argument("--write-latency-model", metavar="FILE", default=None,
                   help="write the loopback latency as a LatencyModel JSON for the sim")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    p.add_argument("--load-test", action="store_true",
                   help="robots beside hostile clients on loopback (see --duration, --window)")
    p.add_argument("--load-sweep", action="store_true",
                   help="offered load vs p99 and deadline misses, admission vs unbounded")
    p.add_argument("--duration", type=float, default=60.0,
                   help="--load-test seconds (default 60)")
    p.add_argument("--window", type=float, default=2.0,
                   help="--load-test: hostile clients on for this long, then off (default 2 s)")
    p.add_argument("--rates", default="50,100,150,200,300,400",
                   help="--load-sweep offered loads, requests/s (comma separated)")
    p.add_argument("--point-s", type=float, default=5.0,
                   help="--load-sweep seconds per point and mode (default 5)")
    p.add_argument("--plot", metavar="PNG", default=None, help="--load-sweep: write the plot")


def run_load_test(args: argparse.Namespace) -> dict[str, Any]:
    """The 60 s load test; returns its numbers."""
    import threading

    from edgerl.bench.planner.load import HOSTILE_KINDS, LoadConfig, run_load
    from edgerl.runtime.planners.local.synthetic import SyntheticPlanner
    from edgerl.runtime.planners.server.server import PlannerServer, ServerConfig

    if not args.duration >= 4 * args.window > 0:
        raise CliError(f"--duration ({args.duration}) must cover at least 2 on/off cycles of "
                       f"--window ({args.window})")
    died: list[Any] = []
    previous, threading.excepthook = threading.excepthook, died.append
    cfg = LoadConfig(good=48, hostile=dict.fromkeys(HOSTILE_KINDS, 4),
                     duration_s=args.duration, period_s=0.1, deadline_s=0.5,
                     hostile_on_s=args.window, hostile_off_s=args.window)
    server = PlannerServer(SyntheticPlanner(), ServerConfig(port=0, obs_dim=cfg.obs_dim,
                                                            idle_timeout_s=1.0,
                                                            read_timeout_s=0.5))
    try:
        result = run_load(server.start(), cfg)
        metrics = server.metrics()
    finally:
        server.stop()
        threading.excepthook = previous
    on, off = result.split(cfg)
    p99_on, p99_off = result.window_percentiles_ms(cfg, 99)
    return {"clients": {"good": cfg.good, **cfg.hostile}, "duration_s": cfg.duration_s,
            "with_hostile": on.summary() | {"requests": len(on.latencies_s)},
            "without_hostile": off.summary() | {"requests": len(off.latencies_s)},
            "p99_ratio": on.percentile_ms(99) / off.percentile_ms(99),
            "window_p99_ms": {"with_hostile": p99_on, "without_hostile": p99_off},
            "window_p99_median_ratio": statistics.median(p99_on) / statistics.median(p99_off),
            "replies": dict(result.replies), "hostile": dict(result.hostile),
            "threads_died": len(died), "server_internal_errors": metrics["internal"],
            "server_threads_alive": metrics["threads_alive"],
            "server_dropped": metrics["dropped"]}


def run_load_sweep(args: argparse.Namespace) -> dict[str, Any]:
    """Offered load vs p99 and deadline-miss rate, admission vs unbounded."""
    from edgerl.bench.planner.load_sweep import run_open_loop
    from edgerl.contract.logs import progress
    from edgerl.runtime.planners.local.synthetic import SyntheticPlanner
    from edgerl.runtime.planners.server.server import PlannerServer, ServerConfig

    try:
        rates = [float(r) for r in args.rates.split(",")]
    except ValueError as exc:
        raise CliError(f"--rates must be numbers separated by commas, got {args.rates!r}") from exc
    if not rates or min(rates) <= 0 or args.point_s <= 0:
        raise CliError("--rates must be positive and --point-s > 0")
    points = []
    for admission, rate in progress([(a, r) for a in (True, False) for r in rates],
                                    total=2 * len(rates), desc="load sweep"):
        server = PlannerServer(SyntheticPlanner(base_s=0.005, row_s=0.0, batch=False),
                               ServerConfig(port=0, obs_dim=8, admission=admission))
        try:
            point = run_open_loop(server.start(), rate, clients=32, duration_s=args.point_s,
                                  deadline_s=0.05)
        finally:
            server.stop()
        points.append({"admission": admission, "rate_hz": rate, **point})
    return {"planner_ms": 5.0, "deadline_ms": 50.0, "clients": 32, "points": points}


def plot_sweep(sweep: dict[str, Any], path: str) -> None:
    """Two panels: p99 (ms) and deadline-miss rate against offered load."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for admission, style in ((True, "o-"), (False, "s--")):
        pts = [p for p in sweep["points"] if p["admission"] is admission]
        label = "deadline-aware admission" if admission else "unbounded admission"
        ax1.plot([p["offered_hz"] for p in pts], [p["p99_ms"] for p in pts], style, label=label)
        ax2.plot([p["offered_hz"] for p in pts], [100 * p["miss_rate"] for p in pts], style,
                 label=label)
    ax1.axhline(sweep["deadline_ms"], color="grey", lw=0.8, ls=":", label="deadline")
    ax1.set(xlabel="offered load (requests/s)", ylabel="p99 latency of requests run (ms)",
            yscale="log", title=f"planner {sweep['planner_ms']:g} ms, capacity "
                                f"{1000 / sweep['planner_ms']:.0f}/s")
    ax2.set(xlabel="offered load (requests/s)", ylabel="deadline-miss rate (%)",
            title=f"{sweep['clients']} robots, deadline {sweep['deadline_ms']:g} ms")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _stats(samples_s: list[float], wall_s: float,
           cpu_s: list[float] | None = None) -> dict[str, float]:
    ms = np.asarray(samples_s, dtype=np.float64) * 1e3
    out = {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
           "mean_ms": float(ms.mean()), "max_ms": float(ms.max()),
           "throughput_rps": len(ms) / wall_s, "requests": len(ms)}
    if cpu_s is not None:  # CPU time of the calling thread: what an idle core would take
        out["cpu_p50_ms"] = float(np.percentile(np.asarray(cpu_s) * 1e3, 50))
    return out


def _timed(fn: Any, n: int, warmup: int, desc: str
           ) -> tuple[list[float], float, list[float]]:
    """Wall-clock and calling-thread CPU seconds per call, and the total wall seconds."""
    from edgerl.contract.logs import progress

    for i in range(warmup):
        fn(i)
    samples, cpu = [], []
    start = time.perf_counter()
    for i in progress(range(n), total=n, desc=desc):
        t, c = time.perf_counter(), time.thread_time()
        fn(i)
        cpu.append(time.thread_time() - c)
        samples.append(time.perf_counter() - t)
    return samples, time.perf_counter() - start, cpu


def build_untrained_bundle(out_dir: Path, task: str = "arm_reach") -> Path:
    """A language planner bundle with the real encoder and a randomly initialised head."""
    import torch

    from edgerl.export.encoder_onnx import export_language_bundle
    from edgerl.policies.language.config import LanguagePlannerConfig
    from edgerl.policies.language.head import untrained_head
    from edgerl.policies.language.instructions import instruction_sets
    from edgerl.policies.language.manifest import make_language_spec
    from edgerl.policies.language_encoder import load_encoder

    torch.manual_seed(0)
    cfg = LanguagePlannerConfig(task=task)
    encoder, tokenizer = load_encoder()
    train, held = instruction_sets(task, encoder, tokenizer, cfg.n_held_out)
    head, task_spec = untrained_head(cfg)
    spec = make_language_spec(cfg, task_spec)
    obs = np.zeros((4, task_spec.obs_dim), np.float32)
    export_language_bundle(out_dir, spec=spec, head=head, encoder=encoder, tokenizer=tokenizer,
                           instructions=train.flat(), parity_obs=obs,
                           extra={"untrained": True})
    return out_dir


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_json, print_table
    from edgerl.contract.spec import BundleError
    from edgerl.runtime.planners.latency_model import latency_model_from_samples, save_latency_model
    from edgerl.runtime.planners.local.language import OnnxLanguagePlanner
    from edgerl.runtime.planners.remote.planner import RemotePlanner
    from edgerl.runtime.planners.server.server import PlannerServer, ServerConfig

    if args.load_test or args.load_sweep:
        out: dict[str, Any] = {}
        if args.load_test:
            out["load_test"] = run_load_test(args)
        if args.load_sweep:
            out["load_sweep"] = run_load_sweep(args)
            if args.plot:
                plot_sweep(out["load_sweep"], args.plot)
        if args.json:
            print_json(out)
        else:
            _print_load(out, print_table)
        return 0
    if args.requests < 10:
        raise CliError(f"--requests must be >= 10 for percentiles, got {args.requests}")
    with tempfile.TemporaryDirectory(prefix="edgerl-bench-planner-") as tmp:
        bundle = Path(args.bundle) if args.bundle else build_untrained_bundle(Path(tmp))
        try:
            uncached = OnnxLanguagePlanner(bundle, cache=False, threads=args.threads)
            cached = OnnxLanguagePlanner(bundle, cache=True, threads=args.threads)
        except BundleError as exc:
            raise CliError(str(exc)) from exc
        texts = cached.instructions or ["reach the red target"]
        rng = np.random.default_rng(0)
        obs = rng.normal(size=(64, uncached.obs_dim)).astype(np.float32)

        def local(i: int, p: OnnxLanguagePlanner = uncached) -> None:
            p.plan(obs[i % len(obs)], texts[i % len(texts)], float(i))

        results: dict[str, Any] = {}
        # onnxruntime with one intra-op thread computes on the calling thread, so its CPU
        # time is the latency an otherwise idle core would see (robust on a busy machine)
        results["local"] = _stats(*_timed(local, args.requests, args.warmup, "local"))
        results["local_cached"] = _stats(*_timed(
            lambda i: local(i, cached), args.requests, args.warmup, "local cached"))
        server = PlannerServer(uncached, ServerConfig(port=0, obs_dim=uncached.obs_dim))
        host, port = server.start()
        try:
            with RemotePlanner(host=host, port=port) as client:
                samples, wall, _ = _timed(lambda i: client.plan(obs[i % len(obs)],
                                                                texts[i % len(texts)],
                                                                float(i)),
                                          args.requests, args.warmup, "loopback")
        finally:
            server.stop()
        results["loopback"] = _stats(samples, wall)
        spec = uncached.spec
    out = {**results, "p50_ms": results["loopback"]["p50_ms"],
           "p99_ms": results["loopback"]["p99_ms"],
           "throughput_rps": results["loopback"]["throughput_rps"],
           "bundle": str(args.bundle) if args.bundle else "untrained head, real encoder"}
    if args.write_latency_model:
        hz = args.control_hz or spec.control_hz
        period = max(1, round(spec.chunk.period_s * hz))
        model = latency_model_from_samples(np.asarray(samples), 1.0 / hz, period)
        save_latency_model(model, args.write_latency_model)
        out["latency_model"] = {"file": args.write_latency_model, "control_hz": hz,
                                "delay_distribution": model.delay_distribution}
    if args.json:
        print_json(out)
    else:
        rows = [{"mode": k, **{c: v.get(c, "") for c in ("p50_ms", "p99_ms", "cpu_p50_ms",
                                                         "throughput_rps")}}
                for k, v in results.items()]
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
