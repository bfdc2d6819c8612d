"""Does waking the firmware just before a paced SETPOINT shorten the round trip?

`edgerl hil` sends one SETPOINT per 20 ms control tick, and after 20 ms of silence a round
trip on the pty costs 3-5x a back-to-back one (docs/firmware.md). This probe sends a HEARTBEAT
``W`` us before each paced SETPOINT (the firmware wakes, feeds its watchdog, answers nothing)
and compares the SETPOINT -> STATE round trip with the plain paced and the back-to-back ones,
interleaved, against the host firmware on a pty, all at SCHED_FIFO (firmware one above).

    python -m edgerl.apps.experiments.probes.serial_warm_probe --rt-priority 10 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from edgerl.contract.clock import MonotonicClock
from edgerl.hil.firmware import FirmwareConfig
from edgerl.hil.rt import set_fifo_process
from edgerl.hil.targets import make_firmware
from edgerl.runtime.serial_transport import SerialConfig, SerialTransport

MODES = ("paced", "warm300", "warm1000", "b2b")


def round_trips(t: SerialTransport, clock: MonotonicClock, mode: str, n: int,
                period_s: float = 0.02, warmup: int = 20) -> tuple[float, float]:
    """p50 and p99 (us) of ``n`` SETPOINT -> STATE round trips in ``mode`` (see MODES:
    ``warmW`` = a HEARTBEAT W us before each paced SETPOINT; ``b2b`` = back to back)."""
    period = 0.0 if mode == "b2b" else period_s
    lead = float(mode[4:]) * 1e-6 if mode.startswith("warm") else 0.0
    rtts: list[float] = []
    tick = clock.now()
    for i in range(n + warmup):
        if period:
            tick = max(tick + period, clock.now())
            if lead:
                clock.sleep_until(tick - lead)
                t.heartbeat()
            clock.sleep_until(tick)
        seq = t.send_setpoint([float(i % 100) * 1e-2])
        s = t.wait_state(seq, 0.5)
        if s is not None and s.setpoint_seq == seq and i >= warmup:
            rtts.append((s.t_host - t.sent_times()[seq]) * 1e6)
    r = np.asarray(rtts)
    return float(np.percentile(r, 50)), float(np.percentile(r, 99))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rt-priority", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--count", type=int, default=250)
    args = ap.parse_args()
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(args.rt_priority))
    fw = make_firmware(FirmwareConfig(watchdog_ms=100, state_period_ms=0, status_period_ms=0),
                       "host").start()
    set_fifo_process(fw.proc.pid, args.rt_priority + 1)
    clock = MonotonicClock()
    try:
        with SerialTransport(SerialConfig(fw.port, rtt_capacity=100_000)) as t:
            for rnd in range(args.rounds):
                for mode in MODES:
                    p50, p99 = round_trips(t, clock, mode, args.count)
                    print(json.dumps({"round": rnd, "mode": mode, "p50_us": round(p50),
                                      "p99_us": round(p99),
                                      "load1": round(os.getloadavg()[0], 2)}), flush=True)
    finally:
        fw.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
