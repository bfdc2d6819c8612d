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
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.cli import CliError

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
    from edgerl.logs import progress

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
    from edgerl.policies.language_encoder import load_encoder
    from edgerl.policies.language_planner import (
        LanguagePlannerConfig,
        instruction_sets,
        make_language_spec,
        untrained_head,
    )

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
    from edgerl.cli.output import print_json, print_table
    from edgerl.runtime.language_planner import OnnxLanguagePlanner
    from edgerl.runtime.planner_server import PlannerServer, ServerConfig
    from edgerl.runtime.remote_planner import (
        RemotePlanner,
        latency_model_from_samples,
        save_latency_model,
    )
    from edgerl.spec import BundleError

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
