"""``PlannerClient``: runs a slow planner beside the edit loop, never blocking it.

Every ``period_s`` the client reads the newest observation from the
:class:`~edgerl.runtime.edit_loop.ObservationSlot`, asks the planner for a chunk and pushes it
into the :class:`~edgerl.runtime.chunk_buffer.ChunkBuffer` (if a call takes longer than the
period, the next one starts right after it). The loop only ever reads the buffer.

Modes:

* ``thread``: the planner object runs in a daemon thread of this process. Right for planners
  that release the GIL while they compute (onnxruntime, torch, a socket to a server).
* ``process``: the planner is built in a ``spawn`` subprocess from a ``"module:function"``
  factory and keyword arguments. Requests and chunks cross a local pipe as raw bytes
  (``struct`` header + float32 array; no pickle on the data path). A crashed process (exit,
  kill) or one that does not answer within ``hang_timeout_s`` is killed and restarted with
  exponential backoff (the child and its pipe: :mod:`.process`).

Counters (:meth:`PlannerClient.stats`): requests, chunks, late (slower than
``late_after_s``), errors (the planner raised), crashes, hangs, restarts.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.clock import Clock, MonotonicClock
from edgerl.contract.planner import Planner, PlannerHealth
from edgerl.runtime.chunk_buffer import ChunkBuffer
from edgerl.runtime.cpu_affinity import pin_thread
from edgerl.runtime.edit_loop import ObservationSlot
from edgerl.runtime.metrics import LoopMetrics
from edgerl.runtime.planners.client.config import PlannerClientConfig
from edgerl.runtime.planners.client.process import (
    PlannerCrashed,
    _ProcessPlanner,
    _resolve,
    _Stopped,
)
from edgerl.runtime.planners.client.worker import WorkerThread

__all__ = ["PlannerClient", "PlannerClientConfig"]

log = logging.getLogger(__name__)


class PlannerClient:
    """Feeds the planner the newest observation at its period; pushes its chunks.

    Args:
        planner: A :class:`~edgerl.contract.planner.Planner` (thread mode) or a
        ``"module:function"``
            factory name (either mode; built in the worker thread or the subprocess).
        buffer: Where chunks go.
        obs: The loop's observation slot.
        cfg: Mode and supervision options.
        metrics: Optional loop metrics; planner latencies are appended to it.
        clock: Time source for observation stamps and latencies.
    """

    def __init__(self, planner: Planner | str, buffer: ChunkBuffer, obs: ObservationSlot,
                 cfg: PlannerClientConfig | None = None, metrics: LoopMetrics | None = None,
                 clock: Clock | None = None) -> None:
        self.cfg = cfg or PlannerClientConfig()
        if self.cfg.mode == "process" and not isinstance(planner, str):
            raise ValueError("process mode needs a 'module:function' planner factory name")
        self._source = planner
        self.buffer, self.obs, self.metrics = buffer, obs, metrics
        self.clock: Clock = clock or MonotonicClock()
        self._planner: Any = None if isinstance(planner, str) else planner
        self._worker = WorkerThread("edgerl-planner-client", self._main)
        self._stop, self._wake = self._worker.stopping, self._worker.wake
        self._obs = np.zeros(obs.dim, np.float32)
        self._backoff = self.cfg.backoff_initial_s
        self.counters = {k: 0 for k in ("requests", "chunks", "late", "errors", "crashes",
                                        "hangs", "restarts")}
        self.last_latency_s = float("nan")
        self._health = PlannerHealth.STARTING
        self._lock = threading.Lock()

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker thread (and, in process mode, the planner process)."""
        self._worker.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the worker and the planner process (if any)."""
        self._worker.stop(timeout)
        self._close_planner()

    def __enter__(self) -> PlannerClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def replan_now(self) -> None:
        """Start the next request without waiting for the period (e.g. at an episode reset):
        at once when the worker is waiting, else as soon as the call in flight returns."""
        self._wake.set()

    @property
    def pid(self) -> int | None:
        """Process id of the planner subprocess (process mode, while running)."""
        p = self._planner
        return p.pid if isinstance(p, _ProcessPlanner) else None

    def health(self) -> PlannerHealth:
        """STARTING until the first chunk; DEAD while restarting; SLOW after a late call."""
        return self._health

    def stats(self) -> dict[str, Any]:
        """Counters, health and the last latency (s)."""
        with self._lock:
            out: dict[str, Any] = dict(self.counters)
        out["health"] = self._health.value
        out["last_latency_s"] = self.last_latency_s
        return out

    def _count(self, key: str) -> None:
        with self._lock:
            self.counters[key] += 1

    # --- the worker --------------------------------------------------------------------------
    def _ensure_planner(self) -> Any:
        if self._planner is not None:
            return self._planner
        source = self._source
        assert isinstance(source, str)
        if self.cfg.mode == "process":
            self._planner = _ProcessPlanner(source, self.cfg, self._stop)
            log.info("planner process %s started (pid %s)", source, self._planner.pid)
        else:
            self._planner = _resolve(source)(**self.cfg.factory_kwargs)
        return self._planner

    def _close_planner(self, kill: bool = False) -> None:
        p = self._planner
        if isinstance(p, _ProcessPlanner):
            p.close(kill=kill)
            self._planner = None

    def _period(self) -> float:
        if self.cfg.period_s is not None:
            return self.cfg.period_s
        p = self._planner
        return p.info.period_s if p is not None else 0.1

    def _late_after(self) -> float:
        if self.cfg.late_after_s is not None:
            return self.cfg.late_after_s
        p = self._planner
        lat = p.info.expected_latency_s if p is not None else 0.0
        return max(2.0 * lat, self._period())

    def _main(self) -> None:
        if self.cfg.rt_priority:
            from edgerl.runtime.loop_scheduler import set_fifo

            set_fifo(self.cfg.rt_priority)
        pin_thread(self.cfg.cpus, "planner cpus")  # before the planner process is spawned
        next_t = time.monotonic()
        first_start = True
        while not self._stop.is_set():
            try:
                if self._planner is None and not first_start:
                    self._count("restarts")
                first_start = False
                self._ensure_planner()
                delay = next_t - time.monotonic()
                if delay > 0:
                    self._wake.wait(delay)
                self._wake.clear()
                if self._stop.is_set():
                    break
                if self.step() is None:  # no observation yet
                    next_t = time.monotonic() + min(0.01, self._period())
                    continue
                self._backoff = self.cfg.backoff_initial_s
                next_t = max(next_t + self._period(), time.monotonic())
            except _Stopped:
                break
            except PlannerCrashed as exc:
                self._health = PlannerHealth.DEAD
                self._count("hangs" if "no answer" in str(exc) else "crashes")
                log.warning("planner crashed: %s; restarting in %.2f s", exc, self._backoff)
                self._close_planner(kill=True)
                self._sleep_backoff()
                next_t = time.monotonic()
            except Exception as exc:  # the planner (or its factory) raised
                self._count("errors")
                log.warning("planner failed: %s: %s; retrying in %.2f s", type(exc).__name__,
                            exc, self._backoff)
                if self._planner is None:
                    self._health = PlannerHealth.DEAD
                self._sleep_backoff()
                next_t = time.monotonic()
        self._close_planner()

    def _sleep_backoff(self) -> None:
        self._stop.wait(self._backoff)
        self._backoff = min(2.0 * self._backoff, self.cfg.backoff_max_s)

    def step(self) -> ActionChunk | None:
        """One synchronous request with the newest observation (used by the worker; call it
        directly with a virtual clock). Returns the merged chunk pushed, or ``None`` when
        there is no finite observation yet."""
        planner = self._ensure_planner()
        t_obs, seq = self.obs.read_into(self._obs)
        if seq == 0 or not math.isfinite(t_obs) or not np.isfinite(self._obs).all():
            return None
        self._count("requests")
        t_req = self.clock.now()
        chunk = planner.plan(self._obs.copy(), self.cfg.instruction, t_obs)
        latency = self.clock.now() - t_req
        self.last_latency_s = latency
        if self.metrics is not None:
            self.metrics.planner_latency_s.append(latency)
        if latency > self._late_after():
            self._count("late")
            self._health = PlannerHealth.SLOW
        else:
            self._health = PlannerHealth.OK
        merged = self.buffer.push(chunk, now=self.clock.now())
        self._count("chunks")
        return merged
