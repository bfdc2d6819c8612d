"""``edgerl record``: join a running edgerl graph (same ROS domain, no nodes of its own
started) and record its topics to a ROS-profile MCAP with the deploy's
:class:`~edgerl_ros.monitor.GraphMonitor` (the topics of ``GraphMonitor.RECORDED``: state,
command, chunk, instruction, episode, operator intervention, diagnostics; raw CDR as
received), for a duration or until SIGINT/SIGTERM; the file is finished either way.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from edgerl_ros.record_output import RecordError, check_output

__all__ = ["RecordError", "check_output", "record_graph"]

log = logging.getLogger(__name__)


def domain_from_env(domain_id: int | None) -> int:
    """``domain_id``, else ``ROS_DOMAIN_ID`` from the environment, else 0 (ROS's default)."""
    if domain_id is not None:
        value = domain_id
    else:
        text = os.environ.get("ROS_DOMAIN_ID", "") or "0"
        try:
            value = int(text)
        except ValueError:
            raise RecordError(f"ROS_DOMAIN_ID={text!r} is not an integer") from None
    if not 0 <= value <= 232:
        raise RecordError(f"ROS domain id must be in 0..232, got {value}")
    return value


class _StopOnSignal:
    """While active, SIGINT and SIGTERM are noted in ``signum`` (the recording loop stops)
    instead of raising in the middle of the recording; the previous handlers come back on
    exit."""

    def __init__(self) -> None:
        self.signum = 0
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: object) -> None:
        self.signum = signum  # the recording loop polls it (no locking in a handler)

    def __enter__(self) -> _StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def record_graph(path: Path, duration_s: float | None = None, domain_id: int | None = None,
                 force: bool = False, stop: threading.Event | None = None) -> dict[str, Any]:
    """Record the graph on ``domain_id`` to ``path`` until ``duration_s`` (s; ``None``: no
    limit) has passed, ``stop`` is set or the process gets SIGINT/SIGTERM.

    Returns ``{"file", "domain_id", "duration_s" (recorded), "stopped_by" ("duration",
    "SIGINT", "SIGTERM", "stop"), "messages" (total), "topics": [{"topic", "messages"}]}``
    with the counts of what the finished file holds, per recorded topic.

    Raises:
        RecordError: a path it cannot write / an existing file without ``force``, a bad
            domain id.
    """
    from edgerl_ros.graph_config import ros_env
    from edgerl_ros.monitor import GraphMonitor
    from edgerl_ros.session import MonitorSession

    if duration_s is not None and not duration_s > 0:
        raise RecordError(f"duration must be > 0 s, got {duration_s}")
    path = Path(path)
    check_output(path, force)
    domain = domain_from_env(domain_id)
    stop = stop if stop is not None else threading.Event()
    monitor = None
    with _StopOnSignal() as signals, MonitorSession(ros_env(domain), "edgerl_record") as ros:
        try:
            try:
                monitor = GraphMonitor(ros.node, path)
            except OSError as exc:
                raise RecordError(f"{path}: cannot write it ({exc})") from exc
            ros.spin()
            t0 = time.perf_counter()
            log.info("recording ROS domain %d to %s (%s)", domain, path,
                     f"{duration_s:g} s" if duration_s else "until Ctrl-C")
            t_end = t0 + duration_s if duration_s else float("inf")
            while not stop.is_set() and not signals.signum and time.perf_counter() < t_end:
                time.sleep(min(0.05, max(0.0, t_end - time.perf_counter())))
            elapsed = time.perf_counter() - t0
        finally:
            ros.stop_spinning()  # no recorder callback after this
            if monitor is not None:
                monitor.close()
    by = signal.Signals(signals.signum).name if signals.signum else \
        ("stop" if stop.is_set() else "duration")
    counts = monitor.recorder.counts()
    return {"file": str(path), "domain_id": domain, "duration_s": round(elapsed, 3),
            "stopped_by": by, "messages": sum(counts.values()),
            "topics": [{"topic": t, "messages": n} for t, n in sorted(counts.items())]}
