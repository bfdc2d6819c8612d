"""The edit loop's scheduler (``edgerl.runtime.loop_scheduler``): the real-time thread on the
clock grid, and the state trigger with its clock fallback."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from edgerl.runtime.bundle import load_bundle
from edgerl.runtime.chunk_buffer import ChunkBuffer
from edgerl.runtime.edit_loop import EditLoop, LoopConfig


def test_realtime_thread_keeps_rate(mlp_bundle, rt_priority):
    """200 Hz for 1 s in its own thread: tick count and deadline misses with wide margins
    (other processes load the machine)."""
    spec, net = load_bundle(mlp_bundle, warmup=1)
    sent = []
    loop = EditLoop(spec, net, ChunkBuffer(), sink=lambda c, t: sent.append(t) or True,
                    cfg=LoopConfig(rate_hz=200.0, rt_priority=rt_priority))
    loop.obs.write(np.ones(4, np.float32), 0.0)
    loop.start()
    try:
        time.sleep(1.0)
    finally:
        loop.stop()
    m = loop.metrics
    assert 150 <= m.ticks + m.skipped <= 205
    assert m.deadline_misses <= (0.05 if rt_priority else 0.3) * m.ticks
    gaps = np.diff(sent)
    assert np.all(np.abs(np.round(gaps / 0.005) * 0.005 - gaps) < 1e-9)  # on the 5 ms grid
    assert loop.state == "no_chunk" and not loop.running


def test_state_trigger_ticks_on_each_state_and_falls_back_to_the_clock(mlp_bundle):
    """Event-triggered: one tick per written state, right after it; a silent sensor gets
    clock ticks every trigger_timeout (1.5 periods at 100 Hz = 15 ms)."""
    spec, net = load_bundle(mlp_bundle, warmup=1)
    sent: list[float] = []
    loop = EditLoop(spec, net, ChunkBuffer(), sink=lambda c, t: sent.append(t) or True,
                    cfg=LoopConfig(trigger="state", gc_freeze=False))
    assert loop.trigger == "state" and loop.trigger_timeout_s == pytest.approx(0.015)
    writes: list[float] = []

    def sensor():
        for i in range(20):
            time.sleep(0.007 if i % 2 else 0.011)  # irregular, not on any 10 ms grid
            t = loop.clock.now()
            loop.obs.write(np.full(4, 0.1 * i, np.float32), t)
            writes.append(t)

    loop.start()
    try:
        thread = threading.Thread(target=sensor)
        thread.start()
        thread.join()
        time.sleep(0.1)  # silence: clock fallback ticks
    finally:
        loop.stop()
    assert loop.trigger_timeouts >= 3
    # one tick per state (plus the fallbacks); a loaded machine may let two writes land
    # before the thread wakes (coalesced: the newest is used), at most a couple here
    expected = len(writes) + loop.trigger_timeouts
    assert loop.metrics.ticks == len(sent) and expected - 2 <= len(sent) <= expected
    # every state answered by a tick after it and before the next state
    after = np.searchsorted(np.asarray(sent), np.asarray(writes))
    assert len(set(after.tolist())) >= len(writes) - 2
    lag = np.asarray(sent)[after] - np.asarray(writes)
    assert np.all(lag >= 0) and np.median(lag) < 0.002, lag
    with pytest.raises(ValueError, match="trigger must be clock or state"):
        LoopConfig(trigger="tick")
