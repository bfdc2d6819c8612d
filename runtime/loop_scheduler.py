"""The edit loop's scheduler: the clock grid or state trigger, and the real-time thread.

Scheduling uses absolute deadlines ``start + n * period`` and ``clock.sleep_until`` (sleep,
then spin the last ``spin_s``). A tick that wakes more than a period late skips the missed
deadlines (counted) and keeps the grid. With the ``state`` trigger the loop instead ticks as
soon as each new observation is written to the slot, and on the clock after
``trigger_timeout_s`` without one. :class:`LoopScheduler` is the base of
:class:`~edgerl.runtime.edit_loop.EditLoop` (a base class, not a wrapper: the scheduler calls
``self._step`` directly, with no extra call per tick); :func:`set_fifo` gives a thread
``SCHED_FIFO`` priority.
"""

from __future__ import annotations

import gc
import logging
import math
import os
import sys
import threading
from typing import TypeVar

from edgerl.contract.clock import Clock
from edgerl.runtime.cpu_affinity import check_cpus, pin_thread
from edgerl.runtime.loop_config import LoopConfig
from edgerl.runtime.loop_io import ObservationSlot
from edgerl.runtime.metrics import LoopMetrics

__all__ = ["LoopScheduler", "set_fifo"]

log = logging.getLogger(__name__)

_L = TypeVar("_L", bound="LoopScheduler")


class LoopScheduler:
    """Runs ``self._step(t, overrun) -> state index`` on the clock grid or on new states.

    The subclass sets the attributes below and provides ``_step`` and ``_prewarm`` (the tick
    and its cache warm-up); this class owns the thread (``start``/``stop``, context manager)
    and the scheduling loops (``run_for``).
    """

    clock: Clock
    cfg: LoopConfig
    obs: ObservationSlot
    metrics: LoopMetrics
    #: Tick period (s).
    period: float
    #: ``clock`` or ``state``.
    trigger: str
    trigger_timeout_s: float
    #: State-triggered ticks that fell back to the clock (no state within the timeout).
    trigger_timeouts: int
    last_chunk_age_s: float
    last_send_s: float
    _can_prewarm: bool
    _thread: threading.Thread | None
    _stop: threading.Event
    _error: BaseException | None
    _old_switch: float | None
    #: the loop thread's CPU affinity once pinned (``LoopConfig.cpus``; ``()`` = not pinned)
    cpus_applied: tuple[int, ...] = ()

    def _step(self, t: float, overrun: bool) -> int:
        raise NotImplementedError

    def _prewarm(self) -> None:
        raise NotImplementedError

    def _on_crash(self, exc: BaseException) -> None:
        """Called in the loop thread when the loop dies of ``exc``."""

    # --- real-time thread --------------------------------------------------------------------
    def run_for(self, seconds: float | None = None, ticks: int | None = None) -> None:
        """Run the scheduler in the calling thread until ``seconds``/``ticks`` or stop()."""
        self._stop.clear()
        self._loop(seconds, ticks)

    def _loop(self, seconds: float | None, ticks: int | None) -> None:
        if self.trigger == "state":
            self._loop_on_state(seconds, ticks)
        else:
            self._loop_on_clock(seconds, ticks)

    def _loop_on_state(self, seconds: float | None, ticks: int | None) -> None:
        """Tick as soon as each new observation is written (no prewarm, no grid); after
        ``trigger_timeout_s`` without one, tick on the clock (counted in
        :attr:`trigger_timeouts`). ``late`` records the observation's age at the tick."""
        clock, metrics, slot = self.clock, self.metrics, self.obs
        now = clock.now
        end = float("inf") if seconds is None else now() + seconds
        n_max = -1 if ticks is None else ticks
        seq, n = slot.seq, 0
        while not self._stop.is_set() and n != n_max:
            got = slot.wait_newer(seq, min(self.trigger_timeout_s, max(end - now(), 0.0)))
            woke = now()
            if woke >= end:
                break
            seq = slot.seq
            if not got:
                self.trigger_timeouts += 1
            state = self._step(woke, False)
            done = now()
            age = woke - slot.last_t if got else 0.0
            metrics.record(age, done - woke, self.last_chunk_age_s, state,
                           done - woke > self.period, self.last_send_s)
            n += 1

    def _loop_on_clock(self, seconds: float | None, ticks: int | None) -> None:
        """Per tick: sleep until the prewarm (``spin_s + prewarm_s`` before the deadline),
        hold the GIL (:attr:`LoopConfig.spin_switch_interval_s`), prewarm, spin to the
        deadline, tick, let the GIL go; without prewarm or hold: sleep, spin, tick."""
        hold = self.cfg.spin_switch_interval_s
        base = sys.getswitchinterval()
        try:
            self._clock_ticks(seconds, ticks, hold, base)
        finally:
            if hold is not None:
                sys.setswitchinterval(base)

    def _clock_ticks(self, seconds: float | None, ticks: int | None, hold: float | None,
                     base: float) -> None:
        clock, period, metrics = self.clock, self.period, self.metrics
        now = clock.now
        start = clock.now() + period
        end = float("inf") if seconds is None else start + seconds
        n_max = -1 if ticks is None else ticks
        deadline = start
        n = 0
        lead = self.cfg.prewarm_s if self._can_prewarm else 0.0
        spin = self.cfg.spin_s
        split = bool(lead) or hold is not None
        setswitch = sys.setswitchinterval
        while not self._stop.is_set() and deadline < end and n != n_max:
            if split:
                clock.sleep_until(deadline - spin - lead, spin_s=0.0)  # the OS sleep only
                if hold is not None:
                    setswitch(hold)
                if lead and now() < deadline - spin:  # woke in time: warm, then spin
                    self._prewarm()
                clock.sleep_until(deadline, spin_s=math.inf)  # spin, holding the GIL
            else:
                clock.sleep_until(deadline)
            woke = now()
            late = woke - deadline
            overrun = late > period
            if overrun:  # woke after the next deadline: skip the missed ones, keep the grid
                k = int(late // period)
                metrics.record_skipped(k)
                deadline += k * period
            state = self._step(deadline, overrun)
            done = now()
            metrics.record(late, done - woke, self.last_chunk_age_s, state,
                           done > deadline + period, self.last_send_s)
            if hold is not None:
                setswitch(base)
            deadline += period
            n += 1


    def start(self) -> None:
        """Run the loop in a daemon thread until :meth:`stop`."""
        if self._thread is not None:
            raise RuntimeError("loop already running")
        check_cpus(self.cfg.cpus, "loop cpus")  # refused here, before any thread starts
        if self.cfg.gc_freeze:
            gc.collect()
            gc.freeze()
        if self.cfg.switch_interval_s is not None:
            self._old_switch = sys.getswitchinterval()
            sys.setswitchinterval(self.cfg.switch_interval_s)
        self._stop.clear()
        self._error = None
        self._thread = threading.Thread(target=self._thread_main, name="edgerl-edit-loop",
                                        daemon=True)
        self._thread.start()

    def _thread_main(self) -> None:
        if self.cfg.rt_priority:
            set_fifo(self.cfg.rt_priority)
        try:
            self.cpus_applied = pin_thread(self.cfg.cpus, "loop cpus")
            self._loop(None, None)
        except BaseException as exc:  # surfaced by stop()
            log.exception("edit loop crashed")
            self._error = exc
            self._on_crash(exc)

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the thread (re-raises an exception the loop died of)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                raise RuntimeError("edit loop thread did not stop")
        if self._old_switch is not None:
            sys.setswitchinterval(self._old_switch)
            self._old_switch = None
        if self.cfg.gc_freeze:
            gc.unfreeze()
        if self._error is not None:
            err, self._error = self._error, None
            raise RuntimeError(f"edit loop died: {err}") from err

    @property
    def running(self) -> bool:
        """True while the loop thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self: _L) -> _L:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def set_fifo(priority: int) -> bool:
    """Make the calling thread SCHED_FIFO at ``priority`` (Linux); False (logged) if refused.

    Give every thread that shares the GIL with the loop (sensor callbacks, the planner
    client) a FIFO priority below the loop's: a normal thread preempted while it holds the GIL
    stalls the loop for a whole scheduler slice.
    """
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except (AttributeError, OSError) as exc:
        log.warning("could not set SCHED_FIFO priority %d for thread %s (%s); running with "
                    "normal scheduling", priority, threading.current_thread().name, exc)
        return False
    log.info("thread %s runs SCHED_FIFO priority %d", threading.current_thread().name, priority)
    return True
