"""The planner service under attack (``edgerl bench planner --load-test``).

48 robots (closed loop, a request every 100 ms, deadline 500 ms) beside 16 hostile clients
(4 each of idle, slowloris, oversized, malformed: :data:`.load.HOSTILE_KINDS`) that come and
go in windows of ``window_s`` seconds, against a :class:`PlannerServer` with a synthetic
planner on 127.0.0.1 in this process. The robots' latency with and without the hostile
clients is compared window by window (:meth:`.load.LoadResult.window_percentiles_ms`).
"""

from __future__ import annotations

import statistics
import threading
from dataclasses import dataclass
from typing import Any

from edgerl.bench.planner.load import HOSTILE_KINDS, LoadConfig, LoadResult

__all__ = ["HostileRun", "hostile_load_test", "run_hostile"]


@dataclass
class HostileRun:
    """What one hostile load run saw.

    Attributes:
        cfg: The load (48 robots, 4 hostile clients of each kind, their windows).
        result: The robots' latencies and replies, the hostile clients' outcomes.
        metrics: The server's :meth:`~edgerl.runtime.planners.server.server.PlannerServer.metrics`
            at the end.
        died: Exceptions of threads that died during the run.
    """

    cfg: LoadConfig
    result: LoadResult
    metrics: dict[str, Any]
    died: list[Any]


def run_hostile(duration_s: float, window_s: float, idle_timeout_s: float = 1.0,
                read_timeout_s: float = 0.5) -> HostileRun:
    """The robots and the hostile clients (on for ``window_s``, then off as long) against a
    server with a synthetic planner and these connection timeouts (s), for ``duration_s``."""
    from edgerl.bench.planner.load import run_load
    from edgerl.runtime.planners.local.synthetic import SyntheticPlanner
    from edgerl.runtime.planners.server.config import ConnectionLimits, ServerConfig
    from edgerl.runtime.planners.server.server import PlannerServer

    died: list[Any] = []
    previous, threading.excepthook = threading.excepthook, died.append
    cfg = LoadConfig(good=48, hostile=dict.fromkeys(HOSTILE_KINDS, 4),
                     duration_s=duration_s, period_s=0.1, deadline_s=0.5,
                     hostile_on_s=window_s, hostile_off_s=window_s)
    limits = ConnectionLimits(idle_timeout_s=idle_timeout_s, read_timeout_s=read_timeout_s)
    server = PlannerServer(SyntheticPlanner(), ServerConfig(port=0, obs_dim=cfg.obs_dim,
                                                            connections=limits))
    try:
        result = run_load(server.start(), cfg)
        metrics = server.metrics()
    finally:
        server.stop()
        threading.excepthook = previous
    return HostileRun(cfg, result, metrics, died)


def hostile_load_test(duration_s: float, window_s: float) -> dict[str, Any]:
    """Run the test for ``duration_s`` seconds (hostile clients on for ``window_s``, then off
    as long); returns its numbers: latencies (ms) with and without the hostile clients, the
    p99 ratio pooled and as the median over windows, the replies, the hostile clients'
    outcomes, and the server's health (threads that died, internal errors, drops)."""
    run = run_hostile(duration_s, window_s)
    cfg, result, metrics = run.cfg, run.result, run.metrics
    on, off = result.split(cfg)
    p99_on, p99_off = result.window_percentiles_ms(cfg, 99)
    return {"clients": {"good": cfg.good, **cfg.hostile}, "duration_s": cfg.duration_s,
            "with_hostile": on.summary() | {"requests": len(on.latencies_s)},
            "without_hostile": off.summary() | {"requests": len(off.latencies_s)},
            "p99_ratio": on.percentile_ms(99) / off.percentile_ms(99),
            "window_p99_ms": {"with_hostile": p99_on, "without_hostile": p99_off},
            "window_p99_median_ratio": statistics.median(p99_on) / statistics.median(p99_off),
            "replies": dict(result.replies), "hostile": dict(result.hostile),
            "threads_died": len(run.died), "server_internal_errors": metrics["internal"],
            "server_threads_alive": metrics["threads_alive"],
            "server_dropped": metrics["dropped"]}
