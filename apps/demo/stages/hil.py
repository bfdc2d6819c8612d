"""Demo stage ``hil``: the bundle driving the simulated plant through the host firmware."""

from __future__ import annotations

import time
from pathlib import Path

from edgerl.apps.demo.config import DemoConfig, StageResult

__all__ = ["stage_hil"]


def stage_hil(cfg: DemoConfig, bundle_dir: Path, delay_s: float = 0.0) -> StageResult:
    """Drive the simulated plant through the host firmware on a pty with the bundle, its
    planner slowed by ``delay_s`` as in training and in the ROS 2 stage."""
    from edgerl.hil.firmware import FirmwareError
    from edgerl.hil.harness import HilConfig, run_hil

    t0 = time.perf_counter()
    try:
        res = run_hil(HilConfig(bundle=bundle_dir, task=cfg.task,
                                episodes=cfg.checks.hil_episodes, seed=cfg.seed,
                                planner_latency_s=delay_s)).as_dict()
    except (FirmwareError, OSError, ValueError) as exc:
        return StageResult("HIL (firmware on pty)", False, f"error: {str(exc)[:200]}",
                           time.perf_counter() - t0, {"error": str(exc)})
    ok = res["success"] >= 1.0 and res["estop_ok"] is not False and \
        res.get("corrupted_executed", 0) == 0
    n_ok = round(res["success"] * res["episodes"])
    text = (f"{n_ok}/{res['episodes']} episodes ok, cmd RTT p50 "
            f"{res['cmd_rtt_p50_us'] / 1e3:.2f} ms, e-stop {'ok' if res['estop_ok'] else 'FAIL'}")
    return StageResult("HIL (firmware on pty)", ok, text, time.perf_counter() - t0, res)
