"""`edgerl deploy --robot serial` with and without `--compose` against the host firmware on a
pty fed a plant state at 500 Hz: e2e (firmware sensor sample -> setpoint written), state age
at the tick, tick compute, setpoints acked, serial round trip; alternating runs.

Usage: ``python -m edgerl.apps.experiments.probes.serial_compose --bundle B [--runs 2]
[--seconds 6] [--rt-priority 80]`` (needs ``make firmware``); one JSON line a run. B: an edit
bundle with obs 4, action 1, 50 Hz, a planner (the quoted runs: a random 16-unit network,
``tests/helpers/bundles.py::write_mlp_bundle(obs_dim=4, action_dim=1, control_hz=50.0,
horizon=10, period_s=0.05, planner=True, hidden=(16,))``).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
from pathlib import Path

from edgerl.apps.experiments.probes import CHECKOUT as ROOT


def run_once(bundle: Path, params: Path, compose: bool, seconds: float, rt: int) -> dict:
    from edgerl_ros.graph import DeployConfig, deploy

    from edgerl.hil.firmware import FirmwareConfig, FirmwareProcess

    fw = FirmwareProcess(FirmwareConfig(n_cmd=1, watchdog_ms=300)).start()
    stop = threading.Event()

    def feed() -> None:
        t = 0.0
        while not stop.is_set() and fw.alive:
            fw.send_sensor([0.0, 0.0, 0.02, 0.0], t)
            t += 0.002
            stop.wait(0.002)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        out = deploy(DeployConfig(bundle=bundle, robot="serial", port=fw.port, baud=115200,
                                  duration_s=seconds, params_file=params, compose=compose,
                                  rt_priority=rt))
    finally:
        stop.set()
        feeder.join(5)
        fw.stop()
    return {"compose": compose, "load1": round(os.getloadavg()[0], 2),
            "cmd_rate_hz": round(out["cmd_rate_hz"], 1),
            "e2e_p50_us": out["e2e_latency_p50_us"], "e2e_p99_us": out["e2e_latency_p99_us"],
            "state_age_p50_ms": out["edit_state_age_at_tick_p50_ms"],
            "tick_p50_us": out["edit_tick_compute_p50_us"],
            "setpoints_acked": out["serial_setpoints_acked"],
            "serial_rtt_p50_us": out["serial_rtt_p50_us"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", type=Path, required=True,
                    help="edit bundle: obs 4, action 1, 50 Hz, with a planner")
    ap.add_argument("--runs", type=int, default=2, help="pairs of runs (separate, composed)")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--rt-priority", type=int, default=80)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="serial_compose_"))
    bundle = args.bundle
    params = tmp / "params.yaml"
    params.write_text((ROOT / "ros2_ws/src/edgerl_ros/config/edgerl.yaml").read_text()
                      .replace("trigger: manifest", "trigger: state"))
    for _ in range(args.runs):
        for compose in (False, True):
            print(json.dumps(run_once(bundle, params, compose, args.seconds,
                                      args.rt_priority)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
