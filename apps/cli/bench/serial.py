"""``edgerl bench serial``: command round-trip over the pty and watchdog safe-entry latency.

Round trip: SETPOINT (host timestamp) -> firmware applies it -> STATE echoes the timestamp;
one in flight, on the host clock: back to back (a ping-pong, the default) or, with
``--pace-hz R``, one per tick of an R Hz grid (a control loop's traffic: ``edgerl hil``'s
round trips are paced at the control rate, and a paced round trip costs more than a
back-to-back one on an idle-prone CPU, docs/firmware.md). ``--rt-priority P`` runs as
``edgerl hil --rt-priority P`` does: this process at SCHED_FIFO P, the firmware at P+1, a
0.1 ms GIL switch interval and a frozen GC. Watchdog: after the last applied setpoint the
host goes silent; latency = first SAFE actuator output - that setpoint's send time (host
clock), and the firmware's own ``safe_entry_us`` (its clock). ``--target qemu-m4`` measures
the Cortex-M4 build in QEMU instead of the host build (``edgerl hil --target``'s link).
"""

from __future__ import annotations

import argparse
import sys

from edgerl.apps.cli.errors import CliError

HELP = "serial link: command round-trip over the pty (p50/p99) and watchdog safe-entry latency"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--count", type=int, default=5000, help="round trips (default 5000)")
    p.add_argument("--warmup", type=int, default=200, help="round trips not counted")
    p.add_argument("--watchdog-ms", type=int, default=50, help="firmware watchdog (ms)")
    p.add_argument("--watchdog-trials", type=int, default=10, help="freeze trials")
    p.add_argument("--pace-hz", type=float, default=0.0,
                   help="send one round trip per tick of this grid (Hz), as a control loop "
                        "does (0: back to back, the default)")
    p.add_argument("--rt-priority", type=int, default=0,
                   help="SCHED_FIFO priority for this process, the firmware one higher, as "
                        "edgerl hil --rt-priority (0: off; needs CAP_SYS_NICE); shows the "
                        "floor on a busy machine")
    p.add_argument("--target", default="host", choices=("host", "qemu-m4"),
                   help="firmware: host build on a pty, or the Cortex-M4 build in QEMU")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from edgerl.hil.rt import realtime

    if args.count < 1 or args.warmup < 0 or args.watchdog_trials < 0:
        raise CliError("--count must be >= 1, --warmup and --watchdog-trials >= 0")
    if not 0 <= args.pace_hz <= 10000:
        raise CliError(f"--pace-hz must be in 0..10000 (0: back to back), got {args.pace_hz}")
    if not 0 <= args.rt_priority <= 98:
        raise CliError(f"--rt-priority must be in 0..98 (the firmware runs one higher), got "
                       f"{args.rt_priority}")
    with realtime(args.rt_priority) as rt:  # threads started inside inherit it
        if args.rt_priority and not rt.granted:
            raise CliError(f"--rt-priority {args.rt_priority}: {rt.error}")
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    """The round trips and the watchdog trials (under :func:`run`'s scheduling)."""
    import numpy as np
    from tqdm.auto import tqdm

    from edgerl.apps.cli.output import print_json, print_table
    from edgerl.contract.clock import MonotonicClock
    from edgerl.contract.wire import Mode
    from edgerl.hil.firmware import FirmwareConfig, FirmwareError
    from edgerl.hil.rt import set_fifo_process
    from edgerl.hil.targets import make_firmware
    from edgerl.runtime.serial_transport import SerialConfig, SerialTransport

    show = not args.json and sys.stderr.isatty()
    try:
        fw = make_firmware(FirmwareConfig(watchdog_ms=args.watchdog_ms, state_period_ms=0,
                                          status_period_ms=0), args.target).start()
    except FirmwareError as exc:
        raise CliError(str(exc)) from None
    if fw.proc is not None and args.rt_priority:
        try:  # one above this process, as edgerl hil runs it (QEMU: all its threads)
            set_fifo_process(fw.proc.pid, args.rt_priority + 1)
        except OSError as exc:
            fw.stop()
            raise CliError(f"--rt-priority {args.rt_priority}: {exc}") from None
    clock = MonotonicClock()
    period = 1.0 / args.pace_hz if args.pace_hz else 0.0
    try:
        with SerialTransport(SerialConfig(fw.port, rtt_capacity=args.count + args.warmup)) as t:
            lost = 0
            rtts: list[float] = []
            tick = t_start = clock.now()
            for i in tqdm(range(args.warmup + args.count), desc="round trips", disable=not show):
                if period:  # the next grid tick (after an overrun: at once)
                    tick = max(tick + period, clock.now())
                    clock.sleep_until(tick)
                seq = t.send_setpoint([float(i % 100) * 1e-2])
                s = t.wait_state(seq, 0.5)
                if s is None or s.setpoint_seq != seq:
                    lost += 1
                elif i >= args.warmup:
                    rtts.append((s.t_host - t.sent_times()[seq]) * 1e6)
            wall_s = clock.now() - t_start
            entry_ms, fw_entry_ms = [], []
            for _ in range(args.watchdog_trials):
                seq = t.send_setpoint([0.5])
                t.wait_state(seq, 0.5)
                t_last = t.sent_times()[seq]
                # the SAFE output that follows this setpoint (not the previous trial's, which
                # may still be the newest sample when the wait starts)
                a = fw.wait_actuator(lambda a, t0=t_last: a.mode == Mode.SAFE and a.t_host > t0,
                                     2.0 + args.watchdog_ms / 1e3)
                if a is not None:
                    entry_ms.append((a.t_host - t_last) * 1e3)
                    fw_entry_ms.append(t.request_status()["safe_entry_us"] / 1e3)
    finally:
        fw.stop()
    r = np.asarray(rtts)
    out = {
        "round_trips": int(r.size), "lost": lost, "round_trip_wall_s": round(wall_s, 4),
        "cmd_rtt_p50_us": float(np.percentile(r, 50)) if r.size else None,
        "cmd_rtt_p99_us": float(np.percentile(r, 99)) if r.size else None,
        "cmd_rtt_max_us": float(r.max()) if r.size else None,
        "target": args.target, "pace_hz": args.pace_hz, "rt_priority": args.rt_priority,
        "watchdog_ms": args.watchdog_ms,
        "watchdog_trials": len(entry_ms),
        "safe_entry_ms_max": max(entry_ms) if entry_ms else None,
        "safe_entry_ms_p50": float(np.median(entry_ms)) if entry_ms else None,
        "fw_safe_entry_ms_max": max(fw_entry_ms) if fw_entry_ms else None,
    }
    if args.json:
        print_json(out)
    else:
        print_table([{"metric": k, "value": v} for k, v in out.items()],
                    title="edgerl bench serial")
    return 0

