"""``edgerl bench loop``: edit-loop timing at a fixed rate while a planner runs beside it.

Loads a bundle, sets up an observation source (``--sensor sink``: the command sink writes the
next observation every tick, like a serial link that answers each setpoint with the robot
state; ``--sensor thread``: a separate thread writes at ``--sensor-hz``, like a ROS
subscription callback), a planner
client (a CPU-burning stand-in with ``--planner-latency-ms``, or the bundle's
``planner.onnx``; in a thread or with ``--planner-process`` in a subprocess) and the
``EditLoop`` in its own thread, waits for the first chunk, warms up, then measures for
``--seconds``. Prints the summary (``--json`` for machines) and optionally writes the
histograms (``--save-json``) and a latency PNG (``--png``).
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import threading
import time
from pathlib import Path
from typing import Any

from edgerl.apps.cli.errors import CliError

HELP = "edit-loop timing (tick compute, wake-up jitter, deadline misses) beside a planner"
KEYS = ("rate_hz", "ticks", "tick_compute_p50_us", "tick_compute_p99_us", "jitter_p50_us",
        "jitter_p99_us", "deadline_misses", "max_late_us")

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bundle", required=True, type=Path, help="bundle directory")
    p.add_argument("--rate", type=float, default=None,
                   help="loop rate in Hz (default: the manifest's control_hz)")
    p.add_argument("--seconds", type=float, default=10.0, help="measured duration (s)")
    p.add_argument("--warmup", type=float, default=1.0, help="seconds run before measuring")
    p.add_argument("--planner", choices=("auto", "burn", "onnx", "none"), default="auto",
                   help="auto: the bundle's planner.onnx if present, else the burn stand-in")
    p.add_argument("--planner-process", action="store_true",
                   help="run the planner in a separate process (spawn)")
    p.add_argument("--planner-latency-ms", type=float, default=70.0,
                   help="burn stand-in: CPU time per plan call (ms)")
    p.add_argument("--planner-period-ms", type=float, default=None,
                   help="time between plan calls (default: the manifest's chunk.period_s)")
    p.add_argument("--planner-gil", choices=("release", "hold"), default="release",
                   help="burn stand-in: burn with the GIL released (like a model) or held")
    p.add_argument("--backend", choices=("onnx", "numpy"), default="onnx")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or tensorrt")
    p.add_argument("--spin-us", type=float, default=300.0,
                   help="busy-wait this long before each deadline (us)")
    p.add_argument("--prewarm-us", type=float, default=150.0,
                   help="re-run the network this long before each deadline to warm caches "
                        "(us); 0 disables")
    p.add_argument("--switch-interval-us", type=float, default=200.0,
                   help="sys.setswitchinterval while running (us); 0 leaves it alone")
    p.add_argument("--spin-switch-interval-us", type=float, default=5000.0,
                   help="sys.setswitchinterval from each spin's start to the tick's end (us): "
                        "another thread cannot take the GIL inside the window; 0 leaves it")
    p.add_argument("--rt-priority", type=int, default=0,
                   help="SCHED_FIFO priority (1-99) for the loop thread; 0 = normal scheduling")
    p.add_argument("--loop-cpus", default="",
                   help="CPUs for the loop thread, e.g. 1 or 2-3 (default: not pinned)")
    p.add_argument("--planner-cpus", default="",
                   help="CPUs for the planner client thread and the planner process it "
                        "spawns, e.g. 0 (default: not pinned); keep them off --loop-cpus")
    p.add_argument("--no-gc-freeze", action="store_true", help="do not gc.freeze() at start")
    p.add_argument("--sensor", choices=("sink", "thread"), default="sink",
                   help="observation source: written by the command sink each tick (default), "
                        "or by a separate thread at --sensor-hz")
    p.add_argument("--sensor-hz", type=float, default=500.0,
                   help="--sensor thread: observation rate (Hz)")
    p.add_argument("--trigger", choices=("clock", "state"), default="clock",
                   help="tick on the loop's own clock (default) or on each observation "
                        "(needs --sensor thread; ticks at --sensor-hz)")
    p.add_argument("--save-json", type=Path, default=None,
                   help="write summary + histograms to this file")
    p.add_argument("--png", type=Path, default=None, help="write a latency histogram PNG")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _planner_choice(args: argparse.Namespace, bundle: Path) -> str:
    has_onnx = (bundle / "planner.onnx").is_file()
    if args.planner == "auto":
        return "onnx" if has_onnx else "burn"
    if args.planner == "onnx" and not has_onnx:
        raise CliError(f"{bundle}/planner.onnx not found (use --planner burn)")
    return args.planner


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


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from edgerl.apps.cli.output import print_json, print_table
    from edgerl.contract.logs import progress
    from edgerl.contract.serde import SchemaError
    from edgerl.contract.spec import BundleError
    from edgerl.runtime.cpu_affinity import cpu_list
    from edgerl.runtime.deployment import Deployment
    from edgerl.runtime.edit_loop import LoopConfig
    from edgerl.runtime.inference import InferenceError
    from edgerl.runtime.planners.client.client import PlannerClient, PlannerClientConfig

    if not args.seconds > 0 or args.warmup < 0:
        raise CliError("--seconds must be > 0 and --warmup >= 0")
    if args.trigger == "state" and args.sensor != "thread":
        raise CliError("--trigger state needs --sensor thread (a sink-written observation "
                       "would trigger the next tick at once)")
    try:
        loop_cpus = cpu_list(args.loop_cpus, "--loop-cpus")
        planner_cpus = cpu_list(args.planner_cpus, "--planner-cpus")
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    cfg = LoopConfig(rate_hz=args.rate or None, spin_s=args.spin_us * 1e-6, cpus=loop_cpus,
                     gc_freeze=not args.no_gc_freeze, rt_priority=args.rt_priority,
                     prewarm_s=args.prewarm_us * 1e-6, trigger=args.trigger,
                     switch_interval_s=(args.switch_interval_us * 1e-6
                                        if args.switch_interval_us > 0 else None),
                     spin_switch_interval_s=(args.spin_switch_interval_us * 1e-6
                                             if args.spin_switch_interval_us > 0 else None))
    try:  # buffer (merge) and loop (stale rule, trigger) as the manifest's timing says
        dep = Deployment.from_bundle(args.bundle, loop_cfg=cfg, planner="none",
                                     backend=args.backend, device=args.device)
    except (BundleError, SchemaError, InferenceError) as exc:
        raise CliError(str(exc)) from exc
    spec, net, buffer, loop = dep.spec, dep.backend, dep.buffer, dep.loop
    rate = loop.rate_hz
    choice = _planner_choice(args, args.bundle)
    period = (args.planner_period_ms * 1e-3 if args.planner_period_ms else spec.chunk.period_s)
    ch = spec.chunk
    if choice == "onnx":
        factory = "edgerl.runtime.planners.local.onnx:onnx_planner"
        kwargs: dict[str, Any] = {"model": str(args.bundle / "planner.onnx"),
                                  "horizon": ch.horizon, "action_dim": spec.action.dim,
                                  "dt_s": ch.dt_s, "period_s": period}
    else:
        factory = "edgerl.runtime.planners.local.synthetic:burn_planner"
        kwargs = {"horizon": ch.horizon, "action_dim": spec.action.dim, "dt_s": ch.dt_s,
                  "period_s": period, "latency_s": args.planner_latency_ms * 1e-3,
                  "gil": args.planner_gil, "low": spec.action.low, "high": spec.action.high}
    client = None
    if choice != "none":
        client = PlannerClient(factory, buffer, loop.obs, PlannerClientConfig(
            mode="process" if args.planner_process else "thread", period_s=period,
            factory_kwargs=kwargs, rt_priority=max(0, args.rt_priority - 2),
            cpus=planner_cpus),
            metrics=loop.metrics)
    stop_sensor = threading.Event()
    obs0 = np.zeros(spec.observation.dim, np.float32)
    loop.obs.write(obs0, time.perf_counter())
    sensor = None
    if args.sensor == "sink":
        loop.sink = _FeedbackSink(loop.obs, spec.observation.dim)
    elif args.sensor_hz > 0:
        sensor = threading.Thread(target=_sensor, args=(loop.obs, spec.observation.dim,
                                                        args.sensor_hz, stop_sensor,
                                                        args.rt_priority),
                                  name="edgerl-bench-sensor", daemon=True)
    try:
        if sensor is not None:
            sensor.start()
        if client is not None:
            client.start()
            _wait_first_chunk(buffer, client, timeout=60.0)
        if args.rt_priority:  # the main thread shares the GIL too (see _wait_measured)
            from edgerl.runtime.loop_scheduler import set_fifo

            set_fifo(max(1, args.rt_priority - 3))
        loop.start()
        time.sleep(args.warmup)
        loop.metrics.reset()
        loop.safety.reset_counts()
        _wait_measured(args.seconds, rate, progress)
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
        "seconds": args.seconds, "deadline_miss_pct": summary["deadline_miss_pct"],
        "tick_compute_max_us": summary["tick_compute_max_us"],
        "skipped_ticks": summary["skipped_ticks"], "miss_bursts": summary["miss_bursts"],
        "backend": net.name if net else "none",
        "method": spec.method, "planner": choice,
        "planner_mode": "process" if args.planner_process else "thread",
        "planner_latency_p50_ms": summary["planner_latency_p50_ms"],
        "planner_latency_p99_ms": summary["planner_latency_p99_ms"],
        "planner_stats": client.stats() if client else {},
        "states": summary["states"], "interventions": loop.safety.interventions(),
        "loop_cpus": list(loop.cpus_applied), "planner_cpus": list(planner_cpus),
    })
    if args.save_json:
        loop.metrics.save_json(args.save_json, extra={"bench": out})
    if args.png:
        try:
            loop.metrics.save_png(args.png, title=f"edit loop {rate:g} Hz")
        except RuntimeError as exc:
            raise CliError(str(exc)) from exc
    if args.json:
        print_json(out)
    else:
        rows = [{"metric": k, "value": out[k]} for k in (*KEYS, "deadline_miss_pct",
                                                         "tick_compute_max_us",
                                                         "planner_latency_p50_ms")]
        print_table(rows, title=f"bench loop {rate:g} Hz, {spec.method}, planner "
                                f"{choice}/{out['planner_mode']}")
    return 0


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
            raise CliError(f"the planner produced no chunk within {timeout:.0f} s "
                           f"({client.stats()})")
        time.sleep(0.01)
