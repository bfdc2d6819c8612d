"""The demo's report: loop timing from the deploy recording, the PNG, and the tables."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["collect_loop_timing", "command_smoothness", "latency_and_trace", "write_png",
           "render_report"]

log = logging.getLogger(__name__)

EDIT_NODE = "edgerl: edit_policy_node"
STATE_TOPIC = "/robot/joint_states"
COMMAND_TOPIC = "/robot/command"


def _number(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def collect_loop_timing(mcap: Path) -> dict[str, float]:
    """The edit node's last ``/diagnostics`` key/values in the recording, as numbers
    (``tick_compute_p50_us``, ``jitter_p99_us``, ``deadline_misses``, ...); {} if none."""
    from edgerl_ros.recording import read_recording

    data = read_recording(mcap)
    last: dict[str, float] = {}
    for _, msg in data.get("/diagnostics", []):
        for status in msg.status:
            if status.name == EDIT_NODE:
                vals = {kv.key: _number(kv.value) for kv in status.values}
                last = {k: v for k, v in vals.items() if v is not None}
    return last


def latency_and_trace(mcap: Path, warmup_s: float = 1.0) -> dict[str, Any]:
    """From the deploy recording: state -> command latency (ms; command received by the
    recorder minus the stamp of the state it was computed from, after ``warmup_s`` from the
    first state, like ``edgerl deploy``'s monitor latency) and the state and command traces
    (time s from the first state, values by name; commands before the first state dropped)."""
    from edgerl_ros.recording import read_recording

    data = read_recording(mcap)
    states = data.get(STATE_TOPIC, [])
    cmds = data.get(COMMAND_TOPIC, [])
    t_ref = states[0][0] if states else (cmds[0][0] if cmds else 0)
    cmds = [(lt, m) for lt, m in cmds if lt >= t_ref]
    lat = []
    for lt, m in cmds:
        stamp = m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec
        if stamp > 0 and lt >= t_ref + warmup_s * 1e9:  # 0: computed before any state
            lat.append((lt - stamp) * 1e-6)

    def trace(msgs: list, fields: tuple[str, ...]) -> dict[str, Any]:
        if not msgs:
            return {"t": np.zeros(0), "names": [], "values": np.zeros((0, 0))}
        names = list(msgs[0][1].name)
        rows = []
        for _, m in msgs:
            vals = next((list(getattr(m, f)) for f in fields if len(getattr(m, f, []))), [])
            rows.append((vals + [np.nan] * len(names))[:len(names)])
        return {"t": np.array([(lt - t_ref) * 1e-9 for lt, _ in msgs]), "names": names,
                "values": np.asarray(rows, np.float64)}

    return {"latency_ms": np.asarray(lat, np.float64),
            "state": trace(states, ("position",)),
            "command": trace(cmds, ("effort", "position", "velocity"))}


def command_smoothness(values: np.ndarray) -> dict[str, float | int]:
    """How followable a command trace is for an actuator.

    Args:
        values: ``(T, A)`` commands in order, one row per control tick (action units).

    Returns:
        ``ticks`` (T), ``mean_abs_u`` (mean |u|), ``mean_abs_du`` (mean |u_t - u_{t-1}| per
        tick, over all A) and ``sign_change_fraction`` (share of tick pairs where an action
        component flips sign, both sides non-zero). NaN for the rates when T < 2.
    """
    u = np.asarray(values, np.float64)
    if u.ndim == 1:
        u = u[:, None]
    u = u[np.all(np.isfinite(u), axis=1)]
    out: dict[str, float | int] = {"ticks": int(u.shape[0]),
                                   "mean_abs_u": float(np.abs(u).mean()) if u.size else np.nan}
    if u.shape[0] < 2:
        return {**out, "mean_abs_du": np.nan, "sign_change_fraction": np.nan}
    flips = (u[1:] * u[:-1]) < 0
    out["mean_abs_du"] = float(np.abs(np.diff(u, axis=0)).mean())
    out["sign_change_fraction"] = float(flips.mean())
    return out


def write_png(d: dict[str, Any] | None, path: Path, title: str) -> Path | None:
    """Latency histogram + episode trace (state and commands over time) as a small PNG, from
    :func:`latency_and_trace`'s result ``d`` (None: no recording, no PNG)."""
    if d is None:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    lat = d["latency_ms"]
    ax = axes[0]
    if lat.size:
        ax.hist(lat, bins=40, color="tab:blue", log=True)
        for q, c in ((50, "k"), (99, "r")):
            v = float(np.percentile(lat, q))
            ax.axvline(v, color=c, ls="--", label=f"p{q} {v:.1f} ms")
        ax.legend(fontsize="small")
    ax.set_xlabel("state -> command latency (ms)")
    ax.set_ylabel("commands")
    ax.set_title("ROS 2 graph latency (recorder)", fontsize="small")
    for ax, key, ttl in ((axes[1], "state", "ROS 2 deploy trace: state (episodes reset)"),
                         (axes[2], "command", "ROS 2 deploy trace: command")):
        tr = d[key]
        for j, name in enumerate(tr["names"]):
            ax.plot(tr["t"], tr["values"][:, j], lw=1, label=name)
        ax.set_xlabel("time (s)")
        ax.set_title(ttl, fontsize="small")
        if tr["names"]:
            ax.legend(fontsize="x-small", loc="upper right")
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=72)
    plt.close(fig)
    return path


def _f(v: Any, nd: int = 1) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    return f"{v:.{nd}f}" if isinstance(v, float) else str(v)


def timing_rows(t: dict[str, Any]) -> list[dict[str, str]]:
    """Display rows for the loop timing table."""
    def us(k: str) -> str:
        return _f(None if t.get(k) is None else t[k])

    def ms_from_us(k: str) -> str:
        return _f(None if t.get(k) is None else t[k] / 1e3, 2)

    return [
        {"metric": "edit tick compute (us)", "p50": us("tick_compute_p50_us"),
         "p99": us("tick_compute_p99_us"), "source": "ROS 2 edit_policy_node"},
        {"metric": "wake-up jitter (us)", "p50": us("jitter_p50_us"),
         "p99": us("jitter_p99_us"), "source": "ROS 2 edit_policy_node"},
        {"metric": "deadline misses (ticks)", "p50": _f(t.get("deadline_misses"), 0),
         "p99": f"of {_f(t.get('ticks'), 0)}", "source": "ROS 2 edit_policy_node"},
        {"metric": "planner latency (ms)", "p50": _f(t.get("planner_latency_p50_ms")),
         "p99": _f(t.get("planner_latency_p99_ms")), "source": "state stamp -> chunk"},
        {"metric": "state -> command e2e (ms)", "p50": ms_from_us("e2e_latency_p50_us"),
         "p99": ms_from_us("e2e_latency_p99_us"), "source": "sim_robot_node"},
        {"metric": "HIL command RTT (ms)", "p50": ms_from_us("hil_cmd_rtt_p50_us"),
         "p99": ms_from_us("hil_cmd_rtt_p99_us"), "source": "host <-> firmware (pty)"},
    ]


def render_report(report: dict[str, Any]) -> None:
    """Print the stage, success-rate and loop-timing tables and the artefact paths."""
    from edgerl.contract.report import print_table

    print_table(report["stages"], title=f"edgerl demo: {report['task']}, planner delay "
                f"{report['delay_ms']:.0f} ms ({report['total_s']:.0f} s)",
                columns=["stage", "ok", "result", "seconds"])
    rows = [{"method": r["method"], "success_rate": f"{r['success_rate']:.2f}",
             "mean |du| per tick": _f(r.get("action_rate"), 3),
             "episodes": r["episodes"], "what": r["what"]} for r in report["success_rates"]]
    print_table(rows, title=f"success rate, same task and delay ({report['delay_ms']:.0f} ms), "
                "unseen seeds")
    print_table(timing_rows(report["loop_timing"]), title="loop timing")
    cmd = report.get("deploy_command") or {}
    if cmd:
        print_table([{"ticks": cmd["ticks"], "mean |u|": _f(cmd["mean_abs_u"], 3),
                      "mean |du| per tick": _f(cmd["mean_abs_du"], 3),
                      "sign changes": _f(cmd["sign_change_fraction"], 3)}],
                    title="deployed command (ROS 2 recording): can a motor follow it?")
    print_table([{"artefact": k, "path": v} for k, v in report["artifacts"].items()
                 if v is not None], title="artefacts")
    verdict = "HIL episode succeeded" if report["hil_success"] else "HIL episode FAILED"
    sys.stdout.write(f"{verdict}: exit {report['exit_code']}\n")
