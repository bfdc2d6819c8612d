"""InlineStateTrigger: the edit loop ticked in the callback that delivers each state, with a
clock fallback, stepped on a virtual clock."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.clock import VirtualClock
from edgerl.runtime.bundle import load_bundle
from edgerl.runtime.chunk_buffer import ChunkBuffer
from edgerl.runtime.edit_loop import EditLoop, LoopConfig
from edgerl.runtime.state_trigger import InlineStateTrigger


def _loop(mlp_bundle, trigger="state"):
    spec, net = load_bundle(mlp_bundle, warmup=1)
    sent: list[tuple[float, float]] = []
    clock = VirtualClock(10.0)
    loop = EditLoop(spec, net, ChunkBuffer(), clock=clock,
                    sink=lambda c, t: sent.append((t, float(c[0]))) or True,
                    cfg=LoopConfig(trigger=trigger, gc_freeze=False))
    return loop, clock, sent


def test_one_tick_per_state_at_its_arrival_with_its_age(mlp_bundle):
    """Each state ticks once, at the time it is handed over; the recorded lateness is the
    state's age then (here 3 ms), and no fallback tick happens while states keep coming."""
    loop, clock, sent = _loop(mlp_bundle)
    trig = InlineStateTrigger(loop)
    chunk = ActionChunk(np.full((10, 2), 0.2, np.float32), t0=10.0, dt=0.01, obs_time=10.0)
    loop.buffer.push(chunk, 10.0)
    for i in range(5):
        clock.advance(0.01)
        obs_t = clock.now() - 0.003
        loop.obs.write(np.full(4, 0.01 * i, np.float32), obs_t)
        trig.on_state(obs_t)
        assert trig.tick_if_starved() is False  # just ticked
    assert [t for t, _ in sent] == pytest.approx([10.01 + 0.01 * i for i in range(5)])
    assert loop.metrics.ticks == 5 and trig.ticks_on_state == 5
    assert loop.trigger_timeouts == 0
    summary = loop.metrics.summary()
    assert summary["jitter_p50_us"] == pytest.approx(3000.0, rel=1e-3)  # age at the tick
    assert loop.state == "ok"


def test_clock_fallback_after_the_timeout_only(mlp_bundle):
    """Silence: no tick before trigger_timeout_s (1.5 periods = 15 ms at 100 Hz), then one
    fallback tick per timeout, each counted; the stale rule still applies (no chunk)."""
    loop, clock, sent = _loop(mlp_bundle)
    trig = InlineStateTrigger(loop)
    assert loop.trigger_timeout_s == pytest.approx(0.015)
    clock.advance(0.0149)
    assert trig.tick_if_starved() is False and sent == []
    clock.advance(0.0002)
    assert trig.tick_if_starved() is True
    assert loop.trigger_timeouts == 1 and len(sent) == 1 and loop.state == "no_chunk"
    clock.advance(0.0075)  # a timer at half the timeout: not yet
    assert trig.tick_if_starved() is False
    clock.advance(0.0075)
    assert trig.tick_if_starved() is True and loop.trigger_timeouts == 2


def test_refuses_a_clock_loop_or_a_running_thread(mlp_bundle):
    loop, _, _ = _loop(mlp_bundle, trigger="clock")
    with pytest.raises(ValueError, match="state trigger"):
        InlineStateTrigger(loop)


def test_transport_time_is_reported_apart_from_the_policy_work(mlp_bundle):
    """A sink that takes 3 ms (a slow publish): tick compute includes it, ``send_*`` is that
    part, and ``tick_policy_*`` (observation -> command) is what is left."""
    import time

    spec, net = load_bundle(mlp_bundle, warmup=1)
    clock = VirtualClock(0.0)
    loop = EditLoop(spec, net, ChunkBuffer(), clock=clock,
                    sink=lambda c, t: time.sleep(0.003) or True,
                    cfg=LoopConfig(trigger="state", gc_freeze=False))
    trig = InlineStateTrigger(loop)
    for _ in range(5):
        clock.advance(0.01)
        loop.obs.write(np.zeros(4, np.float32), clock.now())
        trig.on_state(clock.now())
    m = loop.metrics.summary()
    assert m["send_p50_us"] >= 3000.0
    assert m["tick_compute_p50_us"] >= m["send_p50_us"]
    assert 0.0 < m["tick_policy_p50_us"] < 2000.0


def test_prewarm_is_scheduled_just_before_the_next_state_and_changes_nothing(mlp_bundle):
    """At 100 Hz with prewarm_s 150 us: warm 500 us before the next expected state; the warm
    pass sends nothing and leaves the next command unchanged."""
    loop, clock, sent = _loop(mlp_bundle)
    trig = InlineStateTrigger(loop)
    assert trig.prewarm_due_in() == pytest.approx(0.01 - 0.0005)
    loop.obs.write(np.full(4, 0.1, np.float32), clock.now())
    trig.on_state(clock.now())
    first = sent[-1][1]
    assert loop.prewarm() is True and len(sent) == 1
    trig.on_state(clock.now())
    assert sent[-1][1] == first
    spec, net = load_bundle(mlp_bundle, warmup=1)
    off = EditLoop(spec, net, ChunkBuffer(), clock=VirtualClock(0.0),
                   cfg=LoopConfig(trigger="state", gc_freeze=False, prewarm_s=0.0))
    assert InlineStateTrigger(off).prewarm_due_in() is None and off.prewarm() is False


def test_fallback_thread_ticks_only_in_silence_and_stops(mlp_bundle):
    """``start_fallback`` (composed robots: no rclpy timer): while states come faster than the
    timeout (15 ms at 100 Hz) it does not tick; in 150 ms of silence it ticks about once per
    timeout, each counted and followed by ``on_tick``; after ``stop_fallback`` nothing ticks
    and the thread is gone. Real clock, so the bounds allow a loaded machine's stalls."""
    import threading
    import time

    spec, net = load_bundle(mlp_bundle, warmup=1)
    sent: list[float] = []
    loop = EditLoop(spec, net, ChunkBuffer(), sink=lambda c, t: sent.append(t) or True,
                    cfg=LoopConfig(trigger="state", gc_freeze=False))
    trig = InlineStateTrigger(loop)
    published: list[int] = []
    trig.start_fallback(on_tick=lambda: published.append(loop.trigger_timeouts))
    with pytest.raises(RuntimeError, match="already running"):
        trig.start_fallback()
    end = time.monotonic() + 0.1
    while time.monotonic() < end:  # states every ~1 ms
        loop.obs.write(np.zeros(4, np.float32), loop.clock.now())
        trig.on_state(loop.clock.now())
        time.sleep(0.001)
    during_states = loop.trigger_timeouts
    time.sleep(0.15)
    silent = loop.trigger_timeouts - during_states
    trig.stop_fallback()
    after = loop.trigger_timeouts
    time.sleep(0.05)
    assert during_states <= 2
    assert 3 <= silent <= 11
    assert published == list(range(1, after + 1))  # on_tick after each fallback tick
    assert loop.trigger_timeouts == after  # stopped
    assert not any(t.name == "edgerl-state-fallback" for t in threading.enumerate())
    trig.stop_fallback()  # a second stop is a no-op
