"""``InlineStateTrigger``: tick an :class:`~edgerl.runtime.edit_loop.EditLoop` inside the
callback that delivers each state, instead of in the loop's own thread.

With the ``state`` trigger, :meth:`EditLoop.start` runs a thread that waits on the
:class:`ObservationSlot` and ticks when a state is written. In a ROS node that costs two
thread hand-offs per state (executor thread writes the slot, loop thread wakes, both contend
for the GIL; measured: e2e p50 10.6 ms, p99 74 ms at 50 Hz under load). Ticking in the
subscription callback itself removes them: the state is written and the command computed and
published by the same thread, with nothing else waiting in between.

The clock fallback stays: :meth:`tick_if_starved`, called from a timer that each state
restarts, ticks (and counts a ``trigger_timeout``) when no state arrived for
``loop.trigger_timeout_s``, so a silent sensor still gets the stale/hold fallbacks. Where the
states come from another thread of the same process (a composed robot), :meth:`start_fallback`
runs that check in a small thread of its own instead: it sleeps until one timeout after the
newest tick, so it wakes about once per timeout and takes the GIL for microseconds, where an
rclpy timer costs a pass of rclpy's Python executor (~1 ms of GIL per wake; at 200 Hz the
executor thread took half a core and the composed sim robot stepped at 110-180 Hz).

The state may arrive in one thread (a composed robot's stepping thread) while the fallback and
prewarm timers fire in another (the executor's): :meth:`on_state`, :meth:`tick_if_starved` and
:meth:`prewarm` hold one lock (uncontended: ~0.1 us), so ticks and the prewarm never overlap
on the loop's buffers. The loop thread must not be running (:meth:`EditLoop.start` is not
called in this mode).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from edgerl.runtime.edit_loop import EditLoop

__all__ = ["InlineStateTrigger"]


class InlineStateTrigger:
    """Drive ``loop`` from state arrivals (see the module docstring).

    Args:
        loop: The edit loop; its ``trigger`` must be ``state`` and its thread not running.
    """

    def __init__(self, loop: EditLoop) -> None:
        if loop.trigger != "state":
            raise ValueError(f"inline ticks need the state trigger, the loop has "
                             f"{loop.trigger!r}")
        if loop.running:
            raise RuntimeError("the loop thread is running; stop it before ticking inline")
        self.loop = loop
        now = loop.clock.now()
        #: Time (loop clock, s) of the newest tick, from a state or the fallback.
        self.last_tick_t = now
        self.ticks_on_state = 0
        self._lock = threading.Lock()
        self._fallback: threading.Thread | None = None
        self._fallback_stop = threading.Event()

    def on_state(self, obs_t: float) -> None:
        """Tick now for the state just written to the slot, observed at ``obs_t`` (loop
        clock, s); records its age at the tick and the tick's compute time."""
        with self._lock:
            woke = self.loop.clock.now()
            self.loop.tick(woke, late=max(woke - obs_t, 0.0))
            self.last_tick_t = woke
            self.ticks_on_state += 1

    def prewarm(self) -> bool:
        """:meth:`EditLoop.prewarm`, serialised with the ticks (it runs the network on the
        loop's own buffers). Returns whether it warmed."""
        with self._lock:
            return self.loop.prewarm()

    def prewarm_due_in(self) -> float | None:
        """Seconds after a tick at which to warm the caches for the next expected state
        (one period minus a lead of ``2 * prewarm_s + 200 us`` for the caller's wake-up), or
        None when the loop cannot prewarm. Other processes evict the network's weights and
        the loop's code while it waits for a state; the clock-triggered loop warms them just
        before each deadline, this gives a state-triggered caller the same chance."""
        loop = self.loop
        if not loop._can_prewarm:
            return None
        return max(loop.period - (2 * loop.cfg.prewarm_s + 200e-6), loop.period / 2)

    def tick_if_starved(self, slack_s: float = 0.0) -> bool:
        """The clock fallback: tick if no tick happened for ``trigger_timeout_s`` (less
        ``slack_s``: a timer restarted at each state may fire a little early). Returns
        whether it ticked (counted in ``loop.trigger_timeouts``)."""
        loop = self.loop
        with self._lock:
            woke = loop.clock.now()
            if woke - self.last_tick_t < loop.trigger_timeout_s - slack_s:
                return False
            loop.trigger_timeouts += 1
            loop.tick(woke)
            self.last_tick_t = woke
        return True

    def start_fallback(self, on_tick: Callable[[], None] | None = None) -> None:
        """Run the clock fallback in a daemon thread until :meth:`stop_fallback`: it sleeps
        until ``trigger_timeout_s`` after the newest tick, then :meth:`tick_if_starved`;
        ``on_tick`` runs after each fallback tick (e.g. publish the command)."""
        if self._fallback is not None:
            raise RuntimeError("the fallback thread is already running")
        self._fallback_stop.clear()
        self._fallback = threading.Thread(target=self._fallback_main, args=(on_tick,),
                                          name="edgerl-state-fallback", daemon=True)
        self._fallback.start()

    def stop_fallback(self, timeout: float = 2.0) -> None:
        """Stop the fallback thread (no-op when none runs)."""
        thread, self._fallback = self._fallback, None
        if thread is None:
            return
        self._fallback_stop.set()
        thread.join(timeout)
        if thread.is_alive():
            raise RuntimeError("the state-trigger fallback thread did not stop")

    def _fallback_main(self, on_tick: Callable[[], None] | None) -> None:
        loop, stop = self.loop, self._fallback_stop
        while not stop.is_set():
            wait = self.last_tick_t + loop.trigger_timeout_s - loop.clock.now()
            if wait > 0:  # a state ticked meanwhile: sleep to one timeout after it
                stop.wait(wait)
            elif self.tick_if_starved() and on_tick is not None:
                on_tick()
