"""The HIL harness: simulated plant <-> firmware (host process, or the Cortex-M4 build in
QEMU: ``HilConfig.target``) <-> pty <-> SerialTransport <-> controller (EditLoop over a
bundle, or the task's LQR expert) <-> planner.

How plant state reaches the firmware: the harness owns the plant. Every control period it
(1) takes the firmware's newest ACTUATOR output (the command really applied, including
safe-state and e-stop zeros), (2) steps the plant with it, (3) writes the new plant state as a
SENSOR frame into the firmware's sensor HAL (the host build's stdin; UART1 on the M4). The
firmware echoes the state to the host in STATE messages over the pty, and the host
controller only ever sees the plant through those. The controller runs at the same rate,
half a period after the plant, and sends one SETPOINT per tick through a sink that the
faults can freeze.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.contract.clock import MonotonicClock
from edgerl.contract.wire import MAX_CMD, MAX_STATE
from edgerl.hil.cable import Cable, unplug_report
from edgerl.hil.controllers import (
    BundleController,
    FreezableSink,
    LqrController,
    make_controller,
)
from edgerl.hil.faults import FaultSpec, RxFaults, TxFaults
from edgerl.hil.firmware import FirmwareConfig
from edgerl.hil.kicks import KickConfig, PlantKicks
from edgerl.hil.link_checks import estop_check, link_probe, safe_entry_ms
from edgerl.hil.operator import OperatorChannel, OperatorConfig, operator_channel
from edgerl.hil.rt import realtime, set_fifo, set_fifo_process
from edgerl.hil.targets import TARGETS, make_firmware
from edgerl.runtime.serial_transport import (
    SerialCommandSink,
    SerialConfig,
    SerialTransport,
)

__all__ = ["HilConfig", "HilResult", "estop_check", "link_probe", "run_hil"]

log = logging.getLogger(__name__)

@dataclass
class HilConfig:
    """One HIL run.

    Attributes:
        bundle: Exported bundle driving the host side (None: the task's LQR expert).
        task: Plant task (default: the bundle's task, else ``cartpole``).
        episodes: Episodes to run (each ends on the task's termination or time-out).
        max_steps: Cap on control steps per episode (None: the task's episode length).
        faults: Fault spec.
        firmware: Firmware options (``n_cmd`` is set from the task).
        check_estop: Run :func:`estop_check` after the episodes, once the link is up (a
            cable still out gives ``estop_ok: None`` and ``estop_skipped: "link down"``, not
            a failed e-stop).
        link_wait_s: Longest wait after the episodes for a pulled cable to be back (s).
        seed: Plant seed.
        planner_latency_s: Added to each planner call (emulates a slow foundation model, as
            the training delay did); bundle mode only.
        target: Where the firmware runs: ``host`` (POSIX build on a pty) or ``qemu-m4``
            (Cortex-M4 build in ``qemu-system-arm -M mps2-an386``).
        link_probe: After the episodes, this many ping-pong round trips on the same link
            (one setpoint in flight, as ``edgerl bench serial``): ``link_rtt_p99_us`` is the
            floor the episodes' ``cmd_rtt_p99_us`` is compared with (``rtt_p99_vs_link``).
        rt_priority: SCHED_FIFO priority for the harness threads (0: off; needs root or
            CAP_SYS_NICE), with a 0.1 ms GIL switch interval and a frozen GC; the firmware
            process runs one priority higher (an MCU has its own CPU), the plant's physics one
            lower so serial I/O preempts it. Where SCHED_FIFO is refused the run goes on
            without it (``rt_granted`` false).
        mode: ``host-loop`` (the host runs the edit loop and sends SETPOINTs) or
            ``fast-loop`` (the MCU runs the bundle's edit policy on streamed CHUNKs:
            :mod:`edgerl.hil.fast_loop`; needs an edit ``bundle``).
        operator: A scripted operator watching the plant that overrides the host loop
            (:mod:`edgerl.hil.operator`; host-loop mode with a bundle).
        record: Write the loop's transitions and the operator's records to this MCAP file
            (:mod:`edgerl.contract.intervention_log`; host-loop mode with an edit bundle).
        explore_std: Exploration noise on the edit residual while the policy is in control
            (policy units; :meth:`~edgerl.runtime.edit_loop.EditLoop.explore`; host-loop
            mode with an edit bundle; 0 = off). ``explore_seed``: its seed.
    """

    bundle: Path | None = None
    task: str | None = None
    episodes: int = 1
    max_steps: int | None = None
    faults: FaultSpec = field(default_factory=FaultSpec)
    firmware: FirmwareConfig = field(default_factory=FirmwareConfig)
    check_estop: bool = True
    seed: int = 0
    planner_latency_s: float = 0.0
    target: str = "host"
    rt_priority: int = 0
    link_probe: int = 300
    link_wait_s: float = 5.0
    mode: str = "host-loop"
    #: A bundle with a gate: who chooses the budgets (``gate``, ``fixed:NAME``,
    #: ``age:NAME:X``; :func:`edgerl.runtime.gate.budget_gate.make_chooser`).
    gate_policy: str = "gate"
    #: How the host expert computes the budgets' plans: ``per-budget`` (one process each,
    #: decisions never wait) or ``shared`` (one process, each decision waits for its plan);
    #: :data:`edgerl.hil.gate.BUDGET_WORKERS`.
    budget_workers: str = "per-budget"
    #: Gaussian noise (std, action units) on the command the plant applies: a disturbance the
    #: planner cannot foresee (the gated scenario's ``GateCfg.action_noise_std``).
    action_noise_std: float = 0.0
    #: Kicks on the applied command after the noise (the gated scenarios' ``kick_*``;
    #: :class:`edgerl.hil.kicks.KickConfig`), None = none.
    kicks: KickConfig | None = None
    operator: OperatorConfig | None = None
    record: Path | None = None
    explore_std: float = 0.0
    explore_seed: int = 0


@dataclass
class HilResult:
    """What ``edgerl hil --json`` prints (first eight keys are the stable interface)."""

    success: float
    episodes: int
    cmd_rtt_p50_us: float
    cmd_rtt_p99_us: float
    bad_frames: int
    lost_frames: int
    watchdog_trips: int
    estop_ok: bool | None
    details: dict[str, Any] = field(default_factory=dict)
    #: Planner latencies (s, observation -> chunk) the host measured (bundle mode); for
    #: ``edgerl hil --write-latency-model``, not part of the JSON.
    planner_latencies_s: list[float] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("success", "episodes", "cmd_rtt_p50_us",
                                             "cmd_rtt_p99_us", "bad_frames", "lost_frames",
                                             "watchdog_trips", "estop_ok")}
        out.update(self.details)
        return out


def _make_plant(task: str, seed: int, bundle: Path | None = None) -> Any:
    from edgerl.hil.gate import bundle_task_kwargs
    from edgerl.sim.registry import make_task

    return make_task(task, num_envs=1, seed=seed, **bundle_task_kwargs(bundle))


def run_hil(cfg: HilConfig, progress: Callable[[int, int], None] | None = None) -> HilResult:
    """Run the HIL episodes; everything started here is stopped on return or error."""
    import torch

    from edgerl.hil.fast_loop import MODES

    if cfg.target not in TARGETS:
        raise ValueError(f"unknown firmware target {cfg.target!r}: expected one of {TARGETS}")
    if cfg.mode not in MODES:
        raise ValueError(f"unknown HIL mode {cfg.mode!r}: expected one of {MODES}")
    if cfg.mode == "fast-loop" and cfg.bundle is None:
        raise ValueError("mode fast-loop needs an edit bundle (--bundle)")
    if (cfg.operator or cfg.record or cfg.explore_std) and (cfg.bundle is None
                                                            or cfg.mode != "host-loop"):
        raise ValueError("an operator, a recording or exploration noise needs host-loop mode "
                         "with a --bundle")
    threads = torch.get_num_threads()
    # one plant env: intra-op worker threads only spin against the serial reader for the CPU
    torch.set_num_threads(1)
    try:
        with realtime(cfg.rt_priority) as rt:  # threads started inside inherit SCHED_FIFO
            result = _run_hil(cfg, progress, rt.granted)
            result.details.update(rt.as_dict())
            return result
    finally:
        torch.set_num_threads(threads)


def _run_hil(cfg: HilConfig, progress: Callable[[int, int], None] | None,
             rt_granted: bool = False) -> HilResult:
    import torch

    from edgerl.hil.fast_loop import FastLoopController, fast_loop_firmware

    task = cfg.task or _bundle_task(cfg.bundle) or "cartpole"
    plant = _make_plant(task, cfg.seed, cfg.bundle)
    rate = float(plant.spec.control_hz)
    period = 1.0 / rate
    n_cmd = int(plant.num_actions)
    max_steps = int(cfg.max_steps or plant.max_episode_length)
    obs_dim = int(plant.get_observations()["policy"].shape[-1])
    if n_cmd > MAX_CMD or obs_dim > MAX_STATE:
        raise ValueError(f"task {task!r}: {n_cmd} actions / {obs_dim} observations exceed the "
                         f"wire schema's MAX_CMD={MAX_CMD} / MAX_STATE={MAX_STATE}")
    fw_cfg = FirmwareConfig(**{**cfg.firmware.__dict__, "n_cmd": n_cmd})
    tx, rx = TxFaults(cfg.faults), RxFaults(cfg.faults)
    successes = 0
    steps_total = 0
    fast = cfg.mode == "fast-loop"
    from edgerl.hil.gate import expert_budget_planner, gate_summary, plan_cost

    experts = expert_budget_planner(cfg.bundle, plant, cfg.seed, fast, cfg.gate_policy,
                                    cfg.budget_workers)
    plant_lock = experts.lock if experts is not None else contextlib.nullcontext()
    noise = np.random.default_rng(cfg.seed + 1)
    kicks = None if cfg.kicks is None else PlantKicks(cfg.kicks, n_cmd, cfg.seed)
    returns: list[float] = []
    costs_at_ends: list[float | None] = []  # the planning price paid by each episode's end
    firmware = (fast_loop_firmware(cfg.bundle, fw_cfg, cfg.target) if fast and cfg.bundle
                else make_firmware(fw_cfg, cfg.target))
    with firmware as fw:
        if rt_granted and fw.proc is not None:
            # one above the harness: the emulated MCU has a CPU of its own on a robot, so the
            # host's threads (physics, planner, spins) never delay it
            set_fifo_process(fw.proc.pid, min(cfg.rt_priority + 1, 99))
        transport = SerialTransport(SerialConfig(fw.port), tx_filter=tx, rx_filter=rx)
        cable = Cable(transport)
        controller: LqrController | BundleController | FastLoopController | None = None
        channel: OperatorChannel | None = None
        try:
            transport.connect()
            sink = FreezableSink(SerialCommandSink(transport))
            controller = make_controller(
                cfg.bundle, fast, plant, rate, sink, transport, obs_dim,
                planner_latency_s=cfg.planner_latency_s, budget_planner=experts,
                gate_policy=cfg.gate_policy, seed=cfg.seed)
            if isinstance(controller, BundleController):
                if cfg.explore_std:
                    controller.loop.explore(cfg.explore_std, cfg.explore_seed)
                channel = operator_channel(cfg.operator, cfg.record, controller.loop, plant,
                                           cfg.bundle)
            obs = plant.get_observations()["policy"][0].numpy()
            fw.send_sensor(obs, 0.0)
            t0 = time.perf_counter() + 2 * period
            controller.start(t0)
            if rt_granted and cfg.rt_priority > 1:
                # the plant's physics (this thread) yields to the serial readers and the
                # controller: at equal SCHED_FIFO priority a woken reader would wait for it
                set_fifo(0, cfg.rt_priority - 1)
            on_reset = getattr(controller, "episode_reset", None)
            clock = MonotonicClock()
            k = 0
            unplugged = froze = False
            for ep in range(cfg.episodes):
                returns.append(0.0)
                if kicks is not None:
                    kicks.start_episode(ep)
                for _ in range(max_steps):
                    clock.sleep_until(t0 + k * period)
                    t_run = k * period
                    f = cfg.faults
                    if f.freeze_at is not None and not froze and t_run >= f.freeze_at:
                        froze = True
                        sink.freeze(f.freeze_s)
                    if f.unplug_at is not None and not unplugged and t_run >= f.unplug_at:
                        unplugged = True
                        cable.pull(f.unplug_s)
                    act = fw.actuator
                    cmd = np.zeros(n_cmd, np.float32) if act is None else act.cmd[:n_cmd]
                    if cfg.action_noise_std > 0:
                        cmd = cmd + cfg.action_noise_std * noise.standard_normal(n_cmd)
                    if kicks is not None:
                        cmd = kicks.apply(cmd)
                    with plant_lock:
                        _, rew, dones, extras = plant.step(torch.as_tensor(cmd[None, :],
                                                                           dtype=torch.float32))
                        obs = plant.get_observations()["policy"][0].numpy()
                    returns[-1] += float(rew[0])
                    done = bool(dones[0])  # the plant reset itself: obs is the next episode's
                    if done and on_reset is not None:
                        on_reset(time.perf_counter())  # before its first state goes out
                    fw.send_sensor(obs, t_run)
                    if channel is not None:
                        channel.observe(obs, done)
                    k += 1
                    steps_total += 1
                    if done:
                        successes += int(bool(extras["success"][0]))
                        break
                else:
                    successes += 1  # reached max_steps without failing
                    plant.reset()
                    if on_reset is not None:
                        on_reset(time.perf_counter())
                if channel is not None:
                    channel.end_episode()
                costs_at_ends.append(plan_cost(getattr(controller, "client", None)))
                if progress is not None:
                    progress(ep + 1, cfg.episodes)
            controller.stop()
            if costs_at_ends:  # plans asked after the last episode ended are the last one's
                costs_at_ends[-1] = plan_cost(getattr(controller, "client", None))
            host_ticks = _host_ticks(controller)
            operator_summary = {} if channel is None else channel.close()
            loop = getattr(controller, "loop", None)
            latencies = [] if loop is None else list(loop.metrics.planner_latency_s)
            if isinstance(controller, FastLoopController):
                latencies = list(controller.planner_latencies_s)
            fast_summary = controller.summary() if isinstance(controller,
                                                              FastLoopController) else {}
            if rt_granted and cfg.rt_priority > 1:
                set_fifo(0, cfg.rt_priority)  # the probe below runs as bench serial does
            transport.tx_filter = transport.rx_filter = None  # the rest runs fault-free
            # a cable pulled near the end may still be out: wait for it (bounded) before
            # anything that needs the link; still down -> reported as such, not as failures
            linked = cable.wait_linked(cfg.link_wait_s)
            reconnects = transport.connects - 1  # before the e-stop self-test's re-plug
            # the episodes' counts, before the probe (the firmware answers in order, so every
            # echo of an episode setpoint has arrived once the STATUS has)
            loop_status = transport.request_status(timeout_s=2.0) if linked else {}
            loop_ts = transport.stats()
            time.sleep(0.05)
            probe = link_probe(transport, n_cmd, cfg.link_probe) if linked else {}
            estop = estop_check(fw, transport, n_cmd) if cfg.check_estop and linked else {}
            status = transport.request_status(timeout_s=2.0) if linked else {}
            ts = transport.stats()
        finally:
            if controller is not None:
                controller.stop()
            if experts is not None:
                experts.close()
            if channel is not None:
                channel.close()
            transport.close()
    acked = transport.acked_setpoints()  # setpoints the firmware executed
    executed_corrupt = len(acked & tx.corrupted_setpoints)
    details = {
        "task": task, "control_hz": rate, "steps": steps_total,
        "setpoints_sent": loop_ts.setpoints_sent,
        "setpoints_applied": loop_status.get("setpoints_applied"),
        "cmd_rtt_max_us": loop_ts.rtt_max_us, "rtt_samples": loop_ts.rtt_samples,
        "host_ticks": host_ticks, "host_ticks_per_step": (
            round(host_ticks / steps_total, 3) if host_ticks is not None and steps_total
            else None),
        **probe, "rtt_p99_vs_link": (round(loop_ts.rtt_p99_us / probe["link_rtt_p99_us"], 3)
                                     if probe.get("link_rtt_p99_us") else None),
        "fw_bad_frames": status.get("bad_frames"), "host_bad_frames": ts.bad_frames,
        "fw_lost_frames": status.get("lost_frames"), "host_lost_frames": ts.lost_frames,
        "corrupted_executed": executed_corrupt, "reconnects": reconnects,
        "safe_entry_ms": safe_entry_ms(fw, transport, sink.freezes),
        "fw_safe_entry_us": status.get("safe_entry_us"),
        "fw_safe_entry_late_us": status.get("safe_entry_late_us"), "estop_checks": estop,
        "estop_skipped": None if linked or not cfg.check_estop else "link down",
        "link_up_at_end": linked, "unplugs": unplug_report(cable.unplugs, fw.history),
        "faults": cfg.faults.as_dict(), "injected": {**tx.as_dict(),
                                                     "rx_corrupted_bytes": rx.corrupted_bytes},
        "watchdog_ms": fw_cfg.watchdog_ms, "target": cfg.target,
        "rt_priority": cfg.rt_priority, "mode": cfg.mode,
        "controller": "lqr" if cfg.bundle is None else str(cfg.bundle), **fast_summary,
        "episode_returns": [round(r, 4) for r in returns],
        "return_mean": float(np.mean(returns)) if returns else None,
        **gate_summary(getattr(controller, "client", None), experts, cfg.gate_policy,
                       cfg.action_noise_std, returns, costs_at_ends),
        **({} if kicks is None else {"kicks": dataclasses.asdict(cfg.kicks),
                                     "kicks_started": kicks.started}),
        **operator_summary,
        **({"explore_std": cfg.explore_std, "explore_seed": cfg.explore_seed}
           if cfg.explore_std else {}),
    }
    return HilResult(
        success=successes / max(cfg.episodes, 1), episodes=cfg.episodes,
        cmd_rtt_p50_us=loop_ts.rtt_p50_us, cmd_rtt_p99_us=loop_ts.rtt_p99_us,
        bad_frames=status.get("bad_frames", 0) + ts.bad_frames,
        lost_frames=status.get("lost_frames", 0) + ts.lost_frames,
        watchdog_trips=status.get("watchdog_trips", 0),
        estop_ok=all(estop.values()) if estop else None, details=details,
        planner_latencies_s=latencies)


def _host_ticks(controller: Any) -> int | None:
    """Commands the host computed in the episodes (LQR ticks, or the edit loop's ticks;
    None for the fast loop, where the MCU computes them): one per plant step is the design,
    ``host_ticks_per_step`` in the JSON."""
    loop = getattr(controller, "loop", None)
    if loop is not None:
        return int(loop.metrics.ticks)
    ticks = getattr(controller, "ticks", None)  # the fast loop's are the MCU's tick records
    return ticks if isinstance(ticks, int) else None


def _bundle_task(bundle: Path | None) -> str | None:
    if bundle is None:
        return None
    from edgerl.contract.spec import load_bundle_manifest

    return load_bundle_manifest(bundle, verify=False).task or None


