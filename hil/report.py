"""The result of a HIL run (:class:`HilResult`, what ``edgerl hil --json`` prints) and how
the run's stages fill it (:func:`build_result`): the link's round trips and frame counts,
the faults and what they did, the e-stop self-test, the host side's and the episodes'
numbers. The key order of :meth:`HilResult.as_dict` is part of the output."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgerl.hil.config import HilConfig
from edgerl.hil.episodes import EpisodeRecord
from edgerl.hil.gate import gate_summary
from edgerl.hil.host_side import HostSide, HostSummary
from edgerl.hil.injection import FaultInjection
from edgerl.hil.link_checks import LinkReport
from edgerl.hil.plant import HilPlant

__all__ = ["HilResult", "build_result"]


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


def build_result(cfg: HilConfig, plant: HilPlant, episodes: EpisodeRecord, host: HostSide,
                 summary: HostSummary, link: LinkReport, faults: FaultInjection, *,
                 watchdog_ms: int, corrupted_executed: int, safe_entry_ms: list[float],
                 unplugs: list[dict[str, Any]]) -> HilResult:
    """The run's result. ``watchdog_ms``: the firmware's; ``corrupted_executed``: corrupted
    setpoints the firmware executed; ``safe_entry_ms``: per host freeze, last setpoint ->
    SAFE (:func:`~edgerl.hil.link_checks.safe_entry_ms`); ``unplugs``: per cable pull
    (:func:`~edgerl.hil.cable.unplug_report`)."""
    loop_ts, ts, probe, status = link.loop_stats, link.stats, link.probe, link.status
    steps, returns, host_ticks = episodes.steps, episodes.returns, summary.host_ticks
    details = {
        "task": plant.task, "control_hz": plant.rate, "steps": steps,
        "setpoints_sent": loop_ts.setpoints_sent,
        "setpoints_applied": link.loop_status.get("setpoints_applied"),
        "cmd_rtt_max_us": loop_ts.rtt_max_us, "rtt_samples": loop_ts.rtt_samples,
        "host_ticks": host_ticks, "host_ticks_per_step": (
            round(host_ticks / steps, 3) if host_ticks is not None and steps else None),
        **probe, "rtt_p99_vs_link": (round(loop_ts.rtt_p99_us / probe["link_rtt_p99_us"], 3)
                                     if probe.get("link_rtt_p99_us") else None),
        "fw_bad_frames": status.get("bad_frames"), "host_bad_frames": ts.bad_frames,
        "fw_lost_frames": status.get("lost_frames"), "host_lost_frames": ts.lost_frames,
        "corrupted_executed": corrupted_executed, "reconnects": link.reconnects,
        "safe_entry_ms": safe_entry_ms,
        "fw_safe_entry_us": status.get("safe_entry_us"),
        "fw_safe_entry_late_us": status.get("safe_entry_late_us"), "estop_checks": link.estop,
        "estop_skipped": None if link.linked or not cfg.check_estop else "link down",
        "link_up_at_end": link.linked, "unplugs": unplugs,
        "faults": cfg.faults.as_dict(), "injected": faults.injected(),
        "watchdog_ms": watchdog_ms, "target": cfg.target,
        "rt_priority": cfg.rt_priority, "mode": cfg.mode,
        "controller": "lqr" if cfg.bundle is None else str(cfg.bundle), **summary.fast_loop,
        "episode_returns": [round(r, 4) for r in returns],
        "return_mean": float(np.mean(returns)) if returns else None,
        **gate_summary(host.client, host.experts, cfg.gate_policy, cfg.action_noise_std,
                       returns, host.costs_at_ends),
        **faults.kick_summary(),
        **summary.operator,
        **({"explore_std": cfg.explore_std, "explore_seed": cfg.explore_seed}
           if cfg.explore_std else {}),
    }
    return HilResult(
        success=episodes.successes / max(cfg.episodes, 1), episodes=cfg.episodes,
        cmd_rtt_p50_us=loop_ts.rtt_p50_us, cmd_rtt_p99_us=loop_ts.rtt_p99_us,
        bad_frames=status.get("bad_frames", 0) + ts.bad_frames,
        lost_frames=status.get("lost_frames", 0) + ts.lost_frames,
        watchdog_trips=status.get("watchdog_trips", 0),
        estop_ok=all(link.estop.values()) if link.estop else None, details=details,
        planner_latencies_s=summary.planner_latencies_s)
