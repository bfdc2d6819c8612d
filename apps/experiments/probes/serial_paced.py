"""Tight versus paced round trips on one firmware link: why a 50 Hz loop's round trip sits
above ``edgerl bench serial``'s ping-pong (docs/firmware.md, "Round trip, HIL").

The host build of the firmware on a pty, SCHED_FIFO 10 (firmware 11) where permitted, no
plant, no controller: ``--count`` SETPOINTs each waited for (its STATE echo), back to back
(``gap 0``, what ``edgerl bench serial`` measures) and with a sleep between them (``gap
0.02``: a 50 Hz loop's traffic), alternating. Prints p50 / p99 (µs) per block with the load.

    python -m edgerl.apps.experiments.probes.serial_paced [--count 300] [--gaps 0,0.02,0,0.02,0.002]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    from edgerl.hil.firmware import FirmwareConfig, FirmwareProcess
    from edgerl.hil.rt import realtime, set_fifo_process
    from edgerl.runtime.serial_transport import SerialConfig, SerialTransport

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=300)
    p.add_argument("--gaps", default="0,0.02,0,0.02,0.002", help="seconds between round trips")
    p.add_argument("--rt-priority", type=int, default=10)
    args = p.parse_args(argv)
    with realtime(args.rt_priority) as rt, \
            FirmwareProcess(FirmwareConfig(state_period_ms=0, status_period_ms=0)) as fw:
        if rt.granted and fw.proc is not None:
            set_fifo_process(fw.proc.pid, min(args.rt_priority + 1, 99))
        with SerialTransport(SerialConfig(fw.port)) as t:
            for gap in (float(g) for g in args.gaps.split(",")):
                rtts = []
                for _ in range(args.count):
                    seq = t.send_setpoint([0.1])
                    s = t.wait_state(seq, 0.5)
                    if s is not None and s.setpoint_seq == seq:
                        rtts.append((s.t_host - t.sent_times()[seq]) * 1e6)
                    if gap:
                        time.sleep(gap)
                p50, p99 = np.percentile(rtts, [50, 99])
                print(json.dumps({"gap_s": gap, "rtt_p50_us": round(float(p50), 1),
                                  "rtt_p99_us": round(float(p99), 1), "samples": len(rtts),
                                  "rt_granted": rt.granted,
                                  "load1": round(os.getloadavg()[0], 2)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
