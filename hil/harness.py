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

import time
from collections.abc import Callable

from edgerl.hil.cable import Cable, unplug_report
from edgerl.hil.config import HilConfig
from edgerl.hil.controllers import FreezableSink
from edgerl.hil.episodes import run_episodes
from edgerl.hil.fast_loop import MODES, fast_loop_firmware
from edgerl.hil.firmware import FirmwareConfig, FirmwareProcess
from edgerl.hil.host_side import HostSide
from edgerl.hil.injection import FaultInjection
from edgerl.hil.link_checks import after_episodes, estop_check, link_probe, safe_entry_ms
from edgerl.hil.plant import HilPlant, plant_task
from edgerl.hil.report import HilResult, build_result
from edgerl.hil.rt import realtime, set_fifo, set_fifo_process
from edgerl.hil.targets import TARGETS, make_firmware
from edgerl.runtime.serial_transport import (
    SerialCommandSink,
    SerialConfig,
    SerialTransport,
)

__all__ = ["HilConfig", "HilResult", "estop_check", "link_probe", "run_hil"]


def run_hil(cfg: HilConfig, progress: Callable[[int, int], None] | None = None) -> HilResult:
    """Run the HIL episodes; everything started here is stopped on return or error."""
    import torch

    _check(cfg)
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


def _check(cfg: HilConfig) -> None:
    """``ValueError`` for a target, a mode or a combination the harness cannot run."""
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


def _run_hil(cfg: HilConfig, progress: Callable[[int, int], None] | None,
             rt_granted: bool = False) -> HilResult:
    """One run, stage by stage: the plant, the faults, the host side (its gated planner
    first), the firmware and the link; the episodes; the checks after them; the result."""
    plant = HilPlant(plant_task(cfg.task, cfg.bundle), cfg.seed, cfg.bundle)
    fw_cfg = FirmwareConfig(**{**cfg.firmware.__dict__, "n_cmd": plant.n_cmd,
                               "cmd_limit": cfg.firmware.cmd_limit or plant.cmd_limit})
    faults = FaultInjection(cfg.faults, plant.n_cmd, cfg.seed, cfg.action_noise_std, cfg.kicks)
    host = HostSide(cfg, plant)
    with _firmware(cfg, fw_cfg, host.fast) as fw:
        if rt_granted and fw.proc is not None:
            # one above the harness: the emulated MCU has a CPU of its own on a robot, so the
            # host's threads (physics, planner, spins) never delay it
            set_fifo_process(fw.proc.pid, min(cfg.rt_priority + 1, 99))
        transport = SerialTransport(SerialConfig(fw.port), tx_filter=faults.tx,
                                    rx_filter=faults.rx)
        cable = Cable(transport)
        try:
            transport.connect()
            sink = FreezableSink(SerialCommandSink(transport))
            host.connect(sink, transport)
            fw.send_sensor(plant.observation(), 0.0)
            t0 = time.perf_counter() + 2 * plant.period
            host.start(t0)
            physics_below_io = rt_granted and cfg.rt_priority > 1
            if physics_below_io:
                # the plant's physics (this thread) yields to the serial readers and the
                # controller: at equal SCHED_FIFO priority a woken reader would wait for it
                set_fifo(0, cfg.rt_priority - 1)
            episodes = run_episodes(fw, plant, host, faults, sink, cable,
                                    episodes=cfg.episodes, max_steps=plant.max_steps(cfg.max_steps),
                                    t0=t0, progress=progress)
            summary = host.finish()
            if physics_below_io:
                set_fifo(0, cfg.rt_priority)  # the probe below runs as bench serial does
            faults.lift(transport)
            # a cable pulled near the end may still be out: wait for it (bounded) before
            # anything that needs the link; still down -> reported as such, not as failures
            link = after_episodes(fw, transport, cable, plant.n_cmd, link_wait_s=cfg.link_wait_s,
                                  probe_count=cfg.link_probe, check_estop=cfg.check_estop)
        finally:
            host.close()
            transport.close()
    return build_result(
        cfg, plant, episodes, host, summary, link, faults, watchdog_ms=fw_cfg.watchdog_ms,
        corrupted_executed=faults.corrupted_executed(transport.acked_setpoints()),
        safe_entry_ms=safe_entry_ms(fw, transport, sink.freezes),
        unplugs=unplug_report(cable.unplugs, fw.history))


def _firmware(cfg: HilConfig, fw_cfg: FirmwareConfig, fast: bool) -> FirmwareProcess:
    """The unstarted firmware for the run: built with the bundle's edit policy for the fast
    loop (the MCU edits), else the plain build for ``cfg.target``."""
    if fast and cfg.bundle:
        return fast_loop_firmware(cfg.bundle, fw_cfg, cfg.target)
    return make_firmware(fw_cfg, cfg.target)
