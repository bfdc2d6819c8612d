"""Planner latency, local (onnxruntime in-process) and over loopback (``edgerl bench planner``).

Local: ``OnnxLanguagePlanner.plan`` with the instruction cache off, so every call tokenizes,
runs the encoder and the head (what a VLA that re-reads its prompt costs), plus the cached
path (head only); ``cpu_p50_ms`` is the calling thread's CPU time per call (onnxruntime with
one thread computes on it), i.e. the latency an idle core would give. Loopback: a
:class:`PlannerServer` on 127.0.0.1 in this process (its own threads; onnxruntime releases
the GIL) answering a :class:`RemotePlanner`'s blocking ``plan`` calls back to back.
``throughput_rps`` is completed requests per wall second of that sequential loop. With
``write_latency_model`` the loopback latency is written as a ``LatencyModel`` (delay
distribution in control steps) for the sim wrappers.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.contract.errors import UserError

__all__ = ["PlannerLatencyConfig", "build_untrained_bundle", "measure_planner_latency"]


@dataclass(frozen=True)
class PlannerLatencyConfig:
    """What ``edgerl bench planner`` (without a load test) measures.

    Attributes:
        bundle: Language planner bundle; ``None`` = an untrained head with the real encoder
            (latency does not depend on the head's weights).
        requests: Timed requests per mode (>= 10 for percentiles).
        warmup: Untimed requests first.
        threads: onnxruntime threads per session.
        control_hz: Control rate (Hz) of the written latency model's delay distribution;
            ``None`` = the bundle's.
        write_latency_model: Write the loopback latency as a ``LatencyModel`` JSON here.
    """

    bundle: Path | None = None
    requests: int = 300
    warmup: int = 20
    threads: int = 1
    control_hz: float | None = None
    write_latency_model: str | None = None


def _stats(samples_s: list[float], wall_s: float,
           cpu_s: list[float] | None = None) -> dict[str, float]:
    """Percentiles (ms) of ``samples_s`` (s), requests per wall second, and the median CPU
    time (ms) of the calling thread when ``cpu_s`` is given."""
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


def measure_planner_latency(cfg: PlannerLatencyConfig) -> dict[str, Any]:
    """``{"local": {...}, "local_cached": {...}, "loopback": {...}, "p50_ms", "p99_ms",
    "throughput_rps", "bundle"}`` (flat keys = loopback; each mode's ``p50_ms``, ``p99_ms``,
    ``mean_ms``, ``max_ms`` in ms, ``throughput_rps``, ``requests``, and for the local
    modes ``cpu_p50_ms``), plus ``latency_model`` (file, control_hz, delay distribution)
    when ``cfg.write_latency_model`` is set. ``UserError`` for a bundle that does not load."""
    from edgerl.contract.spec import BundleError
    from edgerl.runtime.planners.latency_model import latency_model_from_samples, save_latency_model
    from edgerl.runtime.planners.local.language import OnnxLanguagePlanner
    from edgerl.runtime.planners.remote.planner import RemotePlanner
    from edgerl.runtime.planners.server.server import PlannerServer, ServerConfig

    with tempfile.TemporaryDirectory(prefix="edgerl-bench-planner-") as tmp:
        bundle = Path(cfg.bundle) if cfg.bundle else build_untrained_bundle(Path(tmp))
        try:
            uncached = OnnxLanguagePlanner(bundle, cache=False, threads=cfg.threads)
            cached = OnnxLanguagePlanner(bundle, cache=True, threads=cfg.threads)
        except BundleError as exc:
            raise UserError(str(exc)) from exc
        texts = cached.instructions or ["reach the red target"]
        rng = np.random.default_rng(0)
        obs = rng.normal(size=(64, uncached.obs_dim)).astype(np.float32)

        def local(i: int, p: OnnxLanguagePlanner = uncached) -> None:
            p.plan(obs[i % len(obs)], texts[i % len(texts)], float(i))

        results: dict[str, Any] = {}
        # onnxruntime with one intra-op thread computes on the calling thread, so its CPU
        # time is the latency an otherwise idle core would see (robust on a busy machine)
        results["local"] = _stats(*_timed(local, cfg.requests, cfg.warmup, "local"))
        results["local_cached"] = _stats(*_timed(
            lambda i: local(i, cached), cfg.requests, cfg.warmup, "local cached"))
        server = PlannerServer(uncached, ServerConfig(port=0, obs_dim=uncached.obs_dim))
        host, port = server.start()
        try:
            with RemotePlanner(host=host, port=port) as client:
                samples, wall, _ = _timed(lambda i: client.plan(obs[i % len(obs)],
                                                                texts[i % len(texts)],
                                                                float(i)),
                                          cfg.requests, cfg.warmup, "loopback")
        finally:
            server.stop()
        results["loopback"] = _stats(samples, wall)
        spec = uncached.spec
    out = {**results, "p50_ms": results["loopback"]["p50_ms"],
           "p99_ms": results["loopback"]["p99_ms"],
           "throughput_rps": results["loopback"]["throughput_rps"],
           "bundle": str(cfg.bundle) if cfg.bundle else "untrained head, real encoder"}
    if cfg.write_latency_model:
        hz = cfg.control_hz or spec.control_hz
        period = max(1, round(spec.chunk.period_s * hz))
        model = latency_model_from_samples(np.asarray(samples), 1.0 / hz, period)
        save_latency_model(model, cfg.write_latency_model)
        out["latency_model"] = {"file": cfg.write_latency_model, "control_hz": hz,
                                "delay_distribution": model.delay_distribution}
    return out
