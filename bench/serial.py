"""The serial link's command round trip over the pty and the watchdog's safe-entry latency
(``edgerl bench serial``).

Round trip: SETPOINT (host timestamp) -> firmware applies it -> STATE echoes the timestamp;
one in flight, on the host clock: back to back (a ping-pong, ``pace_hz=0``) or one per tick
of a ``pace_hz`` grid (a control loop's traffic: ``edgerl hil``'s round trips are paced at
the control rate, and a paced round trip costs more than a back-to-back one on an idle-prone
CPU, docs/firmware.md). ``rt_priority`` runs as ``edgerl hil --rt-priority`` does: this
process at SCHED_FIFO P, the firmware at P+1, a 0.1 ms GIL switch interval and a frozen GC.
Watchdog: after the last applied setpoint the host goes silent; latency = first SAFE actuator
output - that setpoint's send time (host clock), and the firmware's own ``safe_entry_us``
(its clock). ``target="qemu-m4"`` measures the Cortex-M4 build in QEMU instead of the host
build (``edgerl hil --target``'s link).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgerl.contract.errors import UserError

__all__ = ["SerialBenchConfig", "measure_serial"]


@dataclass(frozen=True)
class SerialBenchConfig:
    """One ``edgerl bench serial`` run.

    Attributes:
        count: Timed round trips.
        warmup: Round trips not counted.
        pace_hz: One round trip per tick of this grid (Hz); 0 = back to back.
        rt_priority: SCHED_FIFO priority of this process, the firmware one higher (0 = off).
        show_progress: A progress bar on a terminal.
        target: Firmware: ``host`` build on a pty, or ``qemu-m4`` in QEMU.
        watchdog_ms: Firmware watchdog (ms).
        watchdog_trials: Freeze trials (the host goes silent, the firmware must go SAFE).
    """

    count: int = 5000
    warmup: int = 200
    pace_hz: float = 0.0
    rt_priority: int = 0
    show_progress: bool = False
    target: str = "host"
    watchdog_ms: int = 50
    watchdog_trials: int = 10


def measure_serial(cfg: SerialBenchConfig) -> dict[str, Any]:
    """The round trips (us percentiles) and the watchdog trials (ms), under ``cfg``'s
    scheduling; ``UserError`` when the priority is refused or the firmware does not start."""
    from edgerl.hil.rt import realtime

    with realtime(cfg.rt_priority) as rt:  # threads started inside inherit it
        if cfg.rt_priority and not rt.granted:
            raise UserError(f"--rt-priority {cfg.rt_priority}: {rt.error}")
        return _measure(cfg)


def _measure(cfg: SerialBenchConfig) -> dict[str, Any]:
    """The round trips and the watchdog trials (under :func:`measure_serial`'s scheduling)."""
    import numpy as np
    from tqdm.auto import tqdm

    from edgerl.contract.clock import MonotonicClock
    from edgerl.contract.wire import Mode
    from edgerl.hil.firmware import FirmwareConfig, FirmwareError
    from edgerl.hil.rt import set_fifo_process
    from edgerl.hil.targets import make_firmware
    from edgerl.runtime.serial_transport import SerialConfig, SerialTransport

    try:
        fw = make_firmware(FirmwareConfig(watchdog_ms=cfg.watchdog_ms, state_period_ms=0,
                                          status_period_ms=0), cfg.target).start()
    except FirmwareError as exc:
        raise UserError(str(exc)) from None
    if fw.proc is not None and cfg.rt_priority:
        try:  # one above this process, as edgerl hil runs it (QEMU: all its threads)
            set_fifo_process(fw.proc.pid, cfg.rt_priority + 1)
        except OSError as exc:
            fw.stop()
            raise UserError(f"--rt-priority {cfg.rt_priority}: {exc}") from None
    clock = MonotonicClock()
    period = 1.0 / cfg.pace_hz if cfg.pace_hz else 0.0
    try:
        with SerialTransport(SerialConfig(fw.port, rtt_capacity=cfg.count + cfg.warmup)) as t:
            lost = 0
            rtts: list[float] = []
            tick = t_start = clock.now()
            for i in tqdm(range(cfg.warmup + cfg.count), desc="round trips",
                          disable=not cfg.show_progress):
                if period:  # the next grid tick (after an overrun: at once)
                    tick = max(tick + period, clock.now())
                    clock.sleep_until(tick)
                seq = t.send_setpoint([float(i % 100) * 1e-2])
                s = t.wait_state(seq, 0.5)
                if s is None or s.setpoint_seq != seq:
                    lost += 1
                elif i >= cfg.warmup:
                    rtts.append((s.t_host - t.sent_times()[seq]) * 1e6)
            wall_s = clock.now() - t_start
            entry_ms, fw_entry_ms = [], []
            for _ in range(cfg.watchdog_trials):
                seq = t.send_setpoint([0.5])
                t.wait_state(seq, 0.5)
                t_last = t.sent_times()[seq]
                # the SAFE output that follows this setpoint (not the previous trial's, which
                # may still be the newest sample when the wait starts)
                a = fw.wait_actuator(lambda a, t0=t_last: a.mode == Mode.SAFE and a.t_host > t0,
                                     2.0 + cfg.watchdog_ms / 1e3)
                if a is not None:
                    entry_ms.append((a.t_host - t_last) * 1e3)
                    fw_entry_ms.append(t.request_status()["safe_entry_us"] / 1e3)
    finally:
        fw.stop()
    r = np.asarray(rtts)
    return {
        "round_trips": int(r.size), "lost": lost, "round_trip_wall_s": round(wall_s, 4),
        "cmd_rtt_p50_us": float(np.percentile(r, 50)) if r.size else None,
        "cmd_rtt_p99_us": float(np.percentile(r, 99)) if r.size else None,
        "cmd_rtt_max_us": float(r.max()) if r.size else None,
        "target": cfg.target, "pace_hz": cfg.pace_hz, "rt_priority": cfg.rt_priority,
        "watchdog_ms": cfg.watchdog_ms,
        "watchdog_trials": len(entry_ms),
        "safe_entry_ms_max": max(entry_ms) if entry_ms else None,
        "safe_entry_ms_p50": float(np.median(entry_ms)) if entry_ms else None,
        "fw_safe_entry_ms_max": max(fw_entry_ms) if fw_entry_ms else None,
    }
