"""The edit loop's timing at a fixed rate while a planner runs beside it (``edgerl bench loop``).

Loads a bundle, sets up an observation source (``sensor="sink"``: the command sink writes
the next observation every tick, like a serial link that answers each setpoint with the
robot state; ``sensor="thread"``: a separate thread writes at ``sensor_hz``, like a ROS
subscription callback), a planner client (a CPU-burning stand-in with ``planner_latency_ms``,
or the bundle's ``planner.onnx``; in a thread or, with ``planner_process``, in a subprocess)
and the ``EditLoop`` in its own thread, waits for the first chunk, warms up, then measures
for ``seconds``. Returns the summary and optionally writes the histograms (``save_json``) and
a latency PNG (``png``).
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgerl.bench.loop.timing import LoopTiming
from edgerl.contract.errors import UserError

__all__ = ["KEYS", "EditLoopBenchConfig", "measure_edit_loop"]

#: The headline figures of :func:`measure_edit_loop`'s result, in table order.
KEYS = ("rate_hz", "ticks", "tick_compute_p50_us", "tick_compute_p99_us", "jitter_p50_us",
        "jitter_p99_us", "deadline_misses", "max_late_us")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EditLoopBenchConfig:
    """One ``edgerl bench loop`` run.

    Attributes:
        bundle: Bundle directory.
        timing: Rate (``None`` = the manifest's control_hz), measured seconds, warm-up, spin,
            switch intervals, prewarm and the loop thread's SCHED_FIFO priority (the planner
            client runs 2 below it, the sensor 1 below, the main thread 3 below).
        planner: ``auto`` (the bundle's planner.onnx if present, else ``burn``), ``burn``,
            ``onnx`` or ``none``.
        planner_process: Run the planner in a separate process (spawn).
        planner_latency_ms: Burn stand-in: CPU time per plan call (ms).
        planner_period_ms: Time between plan calls (ms); ``None`` = the manifest's
            chunk.period_s.
        planner_gil: Burn stand-in: burn with the GIL ``release``-d (like a model) or ``hold``.
        backend: ``onnx`` or ``numpy``.
        device: onnxruntime device: auto, cpu, cuda or tensorrt.
        loop_cpus: CPUs of the loop thread (empty = not pinned).
        planner_cpus: CPUs of the planner client thread and the process it spawns.
        gc_freeze: ``gc.freeze()`` at start.
        sensor: Observation source: ``sink`` (written by the command sink each tick) or
            ``thread`` (a thread writing at ``sensor_hz``).
        sensor_hz: ``sensor="thread"``: observation rate (Hz).
        trigger: Tick on the loop's own ``clock`` or on each observation (``state``).
        save_json: Write summary + histograms to this file.
        png: Write a latency histogram PNG here.
    """

    bundle: Path
    timing: LoopTiming = LoopTiming()
    planner: str = "auto"
    planner_process: bool = False
    planner_latency_ms: float = 70.0
    planner_period_ms: float | None = None
    planner_gil: str = "release"
    backend: str = "onnx"
    device: str = "auto"
    loop_cpus: tuple[int, ...] = ()
    planner_cpus: tuple[int, ...] = ()
    gc_freeze: bool = True
    sensor: str = "sink"
    sensor_hz: float = 500.0
    trigger: str = "clock"
    save_json: Path | None = None
    png: Path | None = None

    @property
    def planner_mode(self) -> str:
        return "process" if self.planner_process else "thread"


def planner_choice(planner: str, bundle: Path) -> str:
    """The planner ``planner`` resolves to for ``bundle`` (``auto``: onnx if the bundle has
    planner.onnx, else burn); ``UserError`` for ``onnx`` without planner.onnx."""
    has_onnx = (bundle / "planner.onnx").is_file()
    if planner == "auto":
        return "onnx" if has_onnx else "burn"
    if planner == "onnx" and not has_onnx:
        raise UserError(f"{bundle}/planner.onnx not found (use --planner burn)")
    return planner


def _sensor(slot, obs_dim: int, hz: float, stop: threading.Event, rt_priority: int) -> None:
    import numpy as np

    if rt_priority:  # a thread that shares the GIL with the loop must not be preempted holding it
        from edgerl.runtime.loop_scheduler import set_fifo

        set_fifo(max(1, rt_priority - 1))

    obs = np.zeros(obs_dim, np.float32)
    phase = np.arange(obs_dim, dtype=np.float32)
    period = 1.0 / hz
    while not stop.wait(period):
        t = time.perf_counter()
        np.sin(np.float32(t) + phase, out=obs)
        slot.write(obs, t)


class _FeedbackSink:
    """Command sink standing in for a plant: each command is answered with a fresh
    observation (sines of the time), written into the loop's observation slot."""

    def __init__(self, slot, obs_dim: int) -> None:
        import numpy as np

        self.slot = slot
        self.obs = np.zeros(obs_dim, np.float32)
        self.phase = np.arange(obs_dim, dtype=np.float32)

    def __call__(self, command, t: float) -> bool:
        import numpy as np

        np.add(self.phase, np.float32(t), out=self.obs)
        np.sin(self.obs, out=self.obs)
        self.slot.write(self.obs, t)
        return True


def _deployment(cfg: EditLoopBenchConfig):
    """The bundle's deployment with the loop configured by ``cfg`` (no planner yet)."""
    from edgerl.contract.serde import SchemaError
    from edgerl.contract.spec import BundleError
    from edgerl.runtime.deployment import Deployment
    from edgerl.runtime.edit_loop import LoopConfig
    from edgerl.runtime.inference import InferenceError

    t = cfg.timing
    loop_cfg = LoopConfig(rate_hz=t.rate_hz or None, spin_s=t.spin_us * 1e-6,
                          cpus=cfg.loop_cpus, gc_freeze=cfg.gc_freeze,
                          rt_priority=t.rt_priority, prewarm_s=t.prewarm_us * 1e-6,
                          trigger=cfg.trigger,
                          switch_interval_s=t.interval_s(t.switch_interval_us),
                          spin_switch_interval_s=t.interval_s(t.spin_switch_interval_us))
    try:  # buffer (merge) and loop (stale rule, trigger) as the manifest's timing says
        return Deployment.from_bundle(cfg.bundle, loop_cfg=loop_cfg, planner="none",
                                      backend=cfg.backend, device=cfg.device)
    except (BundleError, SchemaError, InferenceError) as exc:
        raise UserError(str(exc)) from exc


def _planner_client(cfg: EditLoopBenchConfig, choice: str, spec, buffer, loop):
    """The planner client ``choice`` names (``None`` for ``none``), not started."""
    from edgerl.runtime.planners.client.client import PlannerClient, PlannerClientConfig

    if choice == "none":
        return None
    period = cfg.planner_period_ms * 1e-3 if cfg.planner_period_ms else spec.chunk.period_s
    ch = spec.chunk
    if choice == "onnx":
        factory = "edgerl.runtime.planners.local.onnx:onnx_planner"
        kwargs: dict[str, Any] = {"model": str(cfg.bundle / "planner.onnx"),
                                  "horizon": ch.horizon, "action_dim": spec.action.dim,
                                  "dt_s": ch.dt_s, "period_s": period}
    else:
        factory = "edgerl.runtime.planners.local.synthetic:burn_planner"
        kwargs = {"horizon": ch.horizon, "action_dim": spec.action.dim, "dt_s": ch.dt_s,
                  "period_s": period, "latency_s": cfg.planner_latency_ms * 1e-3,
                  "gil": cfg.planner_gil, "low": spec.action.low, "high": spec.action.high}
    return PlannerClient(factory, buffer, loop.obs, PlannerClientConfig(
        mode=cfg.planner_mode, period_s=period, factory_kwargs=kwargs,
        rt_priority=max(0, cfg.timing.rt_priority - 2), cpus=cfg.planner_cpus),
        metrics=loop.metrics)


def measure_edit_loop(cfg: EditLoopBenchConfig) -> dict[str, Any]:
    """Run the loop as ``cfg`` says; returns :data:`KEYS` and the rest of the summary
    (times in us, planner latency in ms, states, interventions, the CPUs applied).
    ``UserError`` for a bundle that does not load or a planner with no first chunk."""
    import numpy as np

    from edgerl.contract.logs import progress

    dep = _deployment(cfg)
    spec, net, buffer, loop = dep.spec, dep.backend, dep.buffer, dep.loop
    rate = loop.rate_hz
    choice = planner_choice(cfg.planner, cfg.bundle)
    client = _planner_client(cfg, choice, spec, buffer, loop)
    stop_sensor = threading.Event()
    loop.obs.write(np.zeros(spec.observation.dim, np.float32), time.perf_counter())
    sensor = None
    if cfg.sensor == "sink":
        loop.sink = _FeedbackSink(loop.obs, spec.observation.dim)
    elif cfg.sensor_hz > 0:
        sensor = threading.Thread(target=_sensor, args=(loop.obs, spec.observation.dim,
                                                        cfg.sensor_hz, stop_sensor,
                                                        cfg.timing.rt_priority),
                                  name="edgerl-bench-sensor", daemon=True)
    try:
        if sensor is not None:
            sensor.start()
        if client is not None:
            client.start()
            _wait_first_chunk(buffer, client, timeout=60.0)
        if cfg.timing.rt_priority:  # the main thread shares the GIL too (see _wait_measured)
            from edgerl.runtime.loop_scheduler import set_fifo

            set_fifo(max(1, cfg.timing.rt_priority - 3))
        loop.start()
        time.sleep(cfg.timing.warmup_s)
        loop.metrics.reset()
        loop.safety.reset_counts()
        _wait_measured(cfg.timing.seconds, rate, progress)
        loop.stop()
    finally:
        if loop.running:
            loop.stop()
        stop_sensor.set()
        if client is not None:
            client.stop()
        if sensor is not None:
            sensor.join(1.0)
    summary = loop.metrics.summary()
    out: dict[str, Any] = {"rate_hz": rate}
    out.update({k: summary[k] for k in KEYS if k != "rate_hz"})
    out.update({
        "seconds": cfg.timing.seconds, "deadline_miss_pct": summary["deadline_miss_pct"],
        "tick_compute_max_us": summary["tick_compute_max_us"],
        "skipped_ticks": summary["skipped_ticks"], "miss_bursts": summary["miss_bursts"],
        "backend": net.name if net else "none",
        "method": spec.method, "planner": choice, "planner_mode": cfg.planner_mode,
        "planner_latency_p50_ms": summary["planner_latency_p50_ms"],
        "planner_latency_p99_ms": summary["planner_latency_p99_ms"],
        "planner_stats": client.stats() if client else {},
        "states": summary["states"], "interventions": loop.safety.interventions(),
        "loop_cpus": list(loop.cpus_applied), "planner_cpus": list(cfg.planner_cpus),
    })
    if cfg.save_json:
        loop.metrics.save_json(cfg.save_json, extra={"bench": out})
    if cfg.png:
        try:
            loop.metrics.save_png(cfg.png, title=f"edit loop {rate:g} Hz")
        except RuntimeError as exc:
            raise UserError(str(exc)) from exc
    return out


def _wait_measured(seconds: float, rate: float, progress) -> None:
    """Sleep through the measurement in this (main) thread. A bar on a terminal wakes it every
    0.5 s; otherwise it sleeps in one go: every wake-up takes the GIL, and a normal-priority
    thread preempted while holding it stalls the loop."""
    if not sys.stderr.isatty():
        time.sleep(seconds)
        return
    steps = max(1, int(math.ceil(seconds / 0.5)))
    t_end = time.perf_counter() + seconds
    for _ in progress(range(steps), total=steps, desc=f"loop {rate:g} Hz"):
        time.sleep(max(0.0, min(0.5, t_end - time.perf_counter())))


def _wait_first_chunk(buffer, client, timeout: float) -> None:
    end = time.monotonic() + timeout
    while buffer.latest() is None:
        if time.monotonic() > end:
            raise UserError(f"the planner produced no chunk within {timeout:.0f} s "
                            f"({client.stats()})")
        time.sleep(0.01)
