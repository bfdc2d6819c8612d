"""ChunkBuffer: merge policies with hand-computed rows, concurrent readers."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from edgerl.contract.chunk import ActionChunk
from edgerl.runtime.chunk_buffer import ChunkBuffer, MergeConfig, merge_chunks


def chunk(value, t0, n=4, dt=0.1, a=1):
    rows = np.asarray(value, np.float32).reshape(-1, 1) * np.ones((n, a), np.float32) \
        if np.ndim(value) else np.full((n, a), value, np.float32)
    return ActionChunk(actions=rows, t0=t0, dt=dt, obs_time=t0)


def test_replace_keeps_new_chunk():
    buf = ChunkBuffer("replace")
    buf.push(chunk(1.0, 0.0))
    new = chunk(2.0, 0.2)
    assert buf.push(new, now=0.2) is new
    assert buf.latest() is new and buf.version == 2


def test_blend_cross_fades_over_overlap():
    old = chunk([0.0, 1.0, 2.0, 3.0], 0.0)  # rows at t = 0, .1, .2, .3
    new = chunk([10.0, 10.0, 10.0, 10.0], 0.2)  # rows at t = .2 .. .5; overlap t=.2,.3
    out = merge_chunks(old, new, MergeConfig("blend", blend_steps=2), now=0.2)
    # w = 1/3, 2/3 over the 2 overlapping rows
    np.testing.assert_allclose(out.actions[:, 0],
                               [2 / 3 * 2 + 10 / 3, 1 / 3 * 3 + 20 / 3, 10, 10], rtol=1e-6)
    assert out.t0 == new.t0 and out.meta["overlap_rows"] == 2


def test_blend_length_is_the_timing_rule_not_the_overlap():
    old = chunk([0.0, 1.0, 2.0, 3.0], 0.0)
    new = chunk(10.0, 0.0)
    # B = 4 steps: w_k = (k + 1) / 5 over the 2 rows the old chunk still has at now = 0.2
    out = merge_chunks(old, chunk(10.0, 0.1), MergeConfig("blend", blend_steps=4), now=0.2)
    np.testing.assert_allclose(out.actions[:, 0], [10, 0.8 * 2 + 2, 0.6 * 3 + 4, 10],
                               rtol=1e-6)
    # B = 1: only the arrival step is blended (w = 1/2), the rest is the new chunk
    out = merge_chunks(old, new, MergeConfig("blend", blend_steps=1), now=0.0)
    np.testing.assert_allclose(out.actions[:, 0], [5, 10, 10, 10], rtol=1e-6)
    with pytest.raises(ValueError, match="needs blend_steps >= 1"):
        MergeConfig("blend")


def test_buffer_blends_with_previous_chunk_as_planned_and_drops_older_chunks():
    buf = ChunkBuffer(MergeConfig("blend", blend_steps=2))
    buf.push(chunk([0.0, 1.0, 2.0, 3.0], 0.0), now=0.0)
    first = buf.push(chunk(10.0, 0.1), now=0.1)  # rows at .1 .. .4, blended with 1, 2
    np.testing.assert_allclose(first.actions[:, 0], [2 / 3 + 10 / 3, 2 / 3 + 20 / 3,
                                                     10, 10], rtol=1e-6)
    # the next blend starts from the raw 10s, not from the blended rows
    second = buf.push(chunk(20.0, 0.2), now=0.2)
    np.testing.assert_allclose(second.actions[:, 0], [10 / 3 * 2 + 20 / 3, 10 / 3 + 40 / 3,
                                                      20, 20], rtol=1e-6)
    late = chunk(30.0, 0.15)  # planned before the current chunk: dropped
    assert buf.push(late, now=0.25) is late and buf.latest() is second
    assert buf.dropped_old == 1


def test_average_uses_new_weight():
    old = chunk([0.0, 1.0, 2.0, 3.0], 0.0)
    new = chunk(10.0, 0.2)
    out = merge_chunks(old, new, MergeConfig("average", new_weight=0.75), now=0.2)
    np.testing.assert_allclose(out.actions[:, 0], [0.25 * 2 + 7.5, 0.25 * 3 + 7.5, 10, 10],
                               rtol=1e-6)


def test_late_chunk_rows_already_past_are_not_weighted():
    old = chunk([0.0, 1.0, 2.0, 3.0], 0.0)
    new = chunk(10.0, 0.1)  # arrives at now=0.25: its rows at .1 are past
    out = merge_chunks(old, new, MergeConfig("blend", blend_steps=2), now=0.25)
    assert out.meta["overlap_start"] == 1 and out.meta["overlap_rows"] == 2
    np.testing.assert_allclose(out.actions[:, 0],
                               [10, 2 / 3 * 2 + 10 / 3, 1 / 3 * 3 + 20 / 3, 10], rtol=1e-6)


def test_stale_old_chunk_means_no_merge():
    old = chunk(1.0, 0.0)  # ends at 0.4
    new = chunk(5.0, 0.5)
    assert merge_chunks(old, new, MergeConfig("blend", blend_steps=2), now=0.5) is new


def test_bad_policy_and_dimension():
    with pytest.raises(ValueError, match="merge policy 'mean' is not one of"):
        MergeConfig("mean")
    buf = ChunkBuffer("replace", action_dim=2)
    with pytest.raises(ValueError, match="chunk has 1 action columns"):
        buf.push(chunk(1.0, 0.0))


def test_readers_always_see_whole_chunks():
    buf = ChunkBuffer("replace")
    stop = threading.Event()

    def writer():
        v = 0
        while not stop.is_set():
            v += 1
            buf.push(chunk(float(v), 1e-3 * v, n=64, a=8))

    t = threading.Thread(target=writer)
    t.start()
    seen = set()
    deadline = time.monotonic() + 5.0
    try:
        while len(seen) < 50 and time.monotonic() < deadline:
            c = buf.latest()
            if c is not None:
                a = c.actions
                assert (a == a[0, 0]).all()
                seen.add(float(a[0, 0]))
    finally:
        stop.set()
        t.join()
    assert len(seen) >= 50


def test_reset_forgets_the_chunk_and_refuses_chunks_planned_before_it():
    buf = ChunkBuffer("replace")
    buf.push(chunk(1.0, 0.0))
    buf.reset(1.0)  # an episode restarted at t = 1.0
    assert buf.latest() is None and buf.reset_t == 1.0
    late = chunk(2.0, 0.9)  # a planner call in flight across the reset (obs at 0.9)
    assert buf.push(late, now=1.1) is late
    assert buf.latest() is None and buf.dropped_pre_reset == 1
    fresh = chunk(3.0, 1.0)  # planned from the new episode's first observation
    assert buf.push(fresh, now=1.2) is fresh and buf.latest() is fresh
