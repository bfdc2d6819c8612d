"""The deploy summary: the monitor's command stream and the nodes' last diagnostics folded
into the one dict ``edgerl deploy --json`` prints (rates, e2e latency, episodes, ticks)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from edgerl_ros.monitor import GraphMonitor
from edgerl_ros.verdict import episode_verdict

__all__ = ["summarise"]


def _percentile_us(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q) * 1e6) if values else float("nan")


def _as_number(text: str | None) -> float:
    try:
        return float(text) if text is not None else float("nan")
    except ValueError:
        return float("nan")


def summarise(monitor: GraphMonitor, spec: Any, cfg: Any, t_first: float, t_end: float,
               domain: int, bad_sent: int, log_dir: Path) -> dict[str, Any]:
    with monitor.lock:
        times = np.asarray(monitor.cmd_times)
        lat = list(monitor.cmd_latency_s)
        diag = {k: dict(v) for k, v in monitor.diag.items()}
        n_diag = monitor.diag_msgs
    foreign, early = monitor.command_source.refused_by_origin()  # one graph lookup
    t_lo = t_first + cfg.warmup_s
    steady = times[(times >= t_lo) & (times <= t_end)]
    rate = (steady.size - 1) / (steady[-1] - steady[0]) if steady.size > 2 else float("nan")
    lat_arr = np.asarray(lat, dtype=np.float64)  # aligned with times (NaN: no stamp)
    steady_lat = lat_arr[(times >= t_lo) & (times <= t_end)] if lat_arr.size else lat_arr
    steady_lat = list(steady_lat[np.isfinite(steady_lat)])
    robot = diag.get("edgerl: sim_robot_node", {})
    serial = diag.get("edgerl: serial_bridge_node", {})
    edit = diag.get("edgerl: edit_policy_node", {})
    dropped = sum(int(_as_number(d.get("dropped_bad_msgs")) or 0) for d in diag.values()
                  if math.isfinite(_as_number(d.get("dropped_bad_msgs"))))
    successes = _as_number(robot.get("successes"))
    verdict = episode_verdict(successes, _as_number(robot.get("episodes")), cfg.min_success)
    if cfg.robot == "sim" and verdict["success"] is not None:  # asked: the task says so,
        success = bool(verdict["success"])  # in at least min_success of the episodes
    elif cfg.robot == "sim":  # not asked: the graph ran (commands flowed); k/n reported
        success = bool(steady.size > 0)
    elif cfg.robot == "serial":  # linked, and the firmware applied our setpoints
        success = serial.get("connected") == "True" and \
            _as_number(serial.get("setpoints_acked")) > 0 and steady.size > 0
    else:  # a robot we cannot see into: commands flowed
        success = bool(steady.size > 0)
    return {
        "success": success,
        **({k: v for k, v in verdict.items() if k != "success"} if cfg.robot == "sim" else {}),
        "task_success": verdict["success"] if cfg.robot == "sim" else None,
        "commands_foreign": foreign,
        # the edit node's own, received before the graph knew its publisher (not in the rate)
        "commands_before_discovery": early,
        "robot_kind": cfg.robot,
        "cmd_rate_hz": float(rate),
        "configured_rate_hz": float(spec.control_hz),
        # measured where the command lands: the robot process (state publish -> command in)
        "e2e_latency_p50_us": _as_number((robot or serial).get("e2e_latency_p50_us")),
        "e2e_latency_p99_us": _as_number((robot or serial).get("e2e_latency_p99_us")),
        "diagnostics_seen": int(n_diag),
        "dropped_bad_msgs": int(dropped),
        "monitor_latency_p50_us": _percentile_us(steady_lat, 50),
        "monitor_latency_p99_us": _percentile_us(steady_lat, 99),
        "task": spec.task,
        "method": spec.method,
        "duration_s": float(cfg.duration_s),
        "commands": int(steady.size),
        "episodes": int(episodes) if math.isfinite(episodes := _as_number(
            robot.get("episodes"))) else 0,
        "robot_step_rate_hz": _as_number(robot.get("step_rate_hz")),
        "robot": robot or serial,
        "serial_rtt_p50_us": _as_number(serial.get("rtt_p50_us")),
        "serial_rtt_p99_us": _as_number(serial.get("rtt_p99_us")),
        "serial_setpoints_acked": _as_number(serial.get("setpoints_acked")),
        "successes": int(successes) if math.isfinite(successes) else 0,
        "bad_msgs_injected": int(bad_sent),
        "diagnostics_sources": sorted(diag),
        "edit_tick_compute_p50_us": _as_number(edit.get("tick_compute_p50_us")),
        "edit_inference": edit.get("inference"),
        "edit_tick_compute_p99_us": _as_number(edit.get("tick_compute_p99_us")),
        "edit_tick_policy_p50_us": _as_number(edit.get("tick_policy_p50_us")),
        "edit_tick_policy_p99_us": _as_number(edit.get("tick_policy_p99_us")),
        "edit_publish_p50_us": _as_number(edit.get("publish_p50_us")),
        "edit_publish_p99_us": _as_number(edit.get("publish_p99_us")),
        "edit_trigger": edit.get("trigger"),
        # the loop's state at the end and the ticks it spent e-stopped (a latch at start-up,
        # before the robot's first state, once ran every episode of `make demo` e-stopped)
        "edit_loop_state": edit.get("state"),
        "edit_estop_ticks": _as_number(edit.get("ticks estop")),
        "edit_inline_tick": edit.get("inline_tick") == "True",
        "rt_priority": int(cfg.rt_priority),
        "edit_rt_priority_applied": edit.get("rt_priority_applied") == "True",
        "edit_trigger_timeouts": _as_number(edit.get("trigger_timeouts")),
        # states taken by the await_state_s poll, of those received
        "edit_states_awaited": _as_number(edit.get("states_awaited")),
        "edit_states_received": _as_number(edit.get("states_received")),
        "edit_deadline_misses": _as_number(edit.get("deadline_misses")),
        "edit_state_age_at_tick_p50_ms": _as_number(edit.get("state_age_at_tick_p50_ms")),
        "edit_state_age_at_tick_p99_ms": _as_number(edit.get("state_age_at_tick_p99_ms")),
        "ros_domain_id": domain,
        "record": str(cfg.record) if cfg.record else None,
        # the edit node's transitions file: the counts at its last diagnostics (the final
        # drain at shutdown adds the ticks after it)
        "record_transitions": str(cfg.record_transitions) if cfg.record_transitions else None,
        **({k: _as_number(edit.get(k)) for k in ("transitions_recorded",
                                                 "transitions_interventions",
                                                 "transitions_dropped")}
           if cfg.record_transitions else {}),
        "log_dir": str(log_dir),
    }
