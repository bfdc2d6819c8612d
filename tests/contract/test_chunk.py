"""ActionChunk: time/step indexing at boundaries, staleness, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgerl.contract.chunk import MAX_INTENT, ActionChunk, ChunkError


def make_chunk(h: int = 5, a: int = 2, t0: float = 10.0, dt: float = 0.02, **kw) -> ActionChunk:
    actions = np.arange(h * a, dtype=np.float32).reshape(h, a)
    return ActionChunk(actions=actions, t0=t0, dt=dt, **kw)


class TestTimeIndexing:
    def test_exact_boundaries_select_their_row(self):
        c = make_chunk(h=50, dt=0.02, t0=123.456)
        for i in range(50):
            assert c.index_at(c.t0 + i * c.dt) == i
            assert c.index_at(c.t0 + (i + 0.999) * c.dt) == i

    def test_row_values(self):
        c = make_chunk()
        np.testing.assert_array_equal(c.row_at(10.0 + 2.5 * 0.02), [4.0, 5.0])

    def test_before_start_holds_first_row(self):
        c = make_chunk()
        assert c.index_at(9.0) == 0

    def test_stale_at_and_after_end(self):
        c = make_chunk(h=5, dt=0.02, t0=10.0)
        assert c.t_end == pytest.approx(10.1)
        assert c.index_at(10.0 + 4.5 * 0.02) == 4
        assert c.index_at(c.t_end) is None
        assert c.row_at(c.t_end + 1.0) is None
        assert c.is_stale(c.t_end)
        assert not c.is_stale(c.t_end - 0.5 * c.dt)

    def test_rows_from_drops_past_rows(self):
        c = make_chunk(h=5)
        assert c.rows_from(10.0 + 3 * 0.02).shape == (2, 2)
        np.testing.assert_array_equal(c.rows_from(10.0 + 3 * 0.02)[0], [6.0, 7.0])
        assert c.rows_from(100.0).shape == (0, 2)

    def test_age_uses_obs_time(self):
        c = make_chunk(obs_time=9.9)
        assert c.age(10.0) == pytest.approx(0.1)
        assert make_chunk().age(10.5) == pytest.approx(0.5)  # unknown obs_time -> t0

    def test_step_indexing(self):
        c = make_chunk(step0=7)
        assert c.index_at_step(7) == 0
        assert c.index_at_step(11) == 4
        assert c.index_at_step(12) is None
        assert c.index_at_step(3) == 0
        with pytest.raises(ChunkError, match="step0"):
            make_chunk().index_at_step(0)


class TestValidation:
    def test_actions_are_float32_and_read_only(self):
        c = ActionChunk(actions=np.ones((3, 2), dtype=np.float64), t0=0.0, dt=0.1)
        assert c.actions.dtype == np.float32
        with pytest.raises(ValueError):
            c.actions[0, 0] = 5.0

    @pytest.mark.parametrize("shape", [(3,), (0, 2), (2, 0), (2, 2, 2)])
    def test_bad_shapes(self, shape):
        with pytest.raises(ChunkError, match="shape|rows"):
            ActionChunk(actions=np.zeros(shape), t0=0.0, dt=0.1)

    def test_non_finite_named(self):
        a = np.zeros((3, 2))
        a[1, 1] = np.nan
        with pytest.raises(ChunkError, match=r"actions\[1, 1\] is not finite"):
            ActionChunk(actions=a, t0=0.0, dt=0.1)

    @pytest.mark.parametrize("dt", [0.0, -0.1, math.inf, math.nan])
    def test_bad_dt(self, dt):
        with pytest.raises(ChunkError, match="dt"):
            ActionChunk(actions=np.zeros((2, 1)), t0=0.0, dt=dt)

    def test_bad_t0(self):
        with pytest.raises(ChunkError, match="t0"):
            ActionChunk(actions=np.zeros((2, 1)), t0=math.nan, dt=0.1)

    def test_obs_after_end_rejected(self):
        with pytest.raises(ChunkError, match="obs_time"):
            ActionChunk(actions=np.zeros((2, 1)), t0=0.0, dt=0.1, obs_time=5.0)


class TestIntent:
    def test_intent_is_float32_read_only_and_sized(self):
        c = make_chunk(intent=np.array([0.5, -1.0], np.float64))
        assert c.intent.dtype == np.float32 and c.intent_dim == 2
        np.testing.assert_array_equal(c.intent, [0.5, -1.0])
        with pytest.raises(ValueError):
            c.intent[0] = 0.0
        assert make_chunk().intent is None and make_chunk().intent_dim == 0

    def test_the_largest_intent_the_serial_link_carries(self):
        assert MAX_INTENT == 8
        assert make_chunk(intent=np.zeros(MAX_INTENT)).intent_dim == MAX_INTENT
        with pytest.raises(ChunkError, match=r"1 <= I <= 8, got shape \(9,\)"):
            make_chunk(intent=np.zeros(MAX_INTENT + 1))

    @pytest.mark.parametrize("shape", [(0,), (2, 2), ()])
    def test_bad_intent_shapes(self, shape):
        with pytest.raises(ChunkError, match="intent must have shape"):
            make_chunk(intent=np.zeros(shape))

    def test_non_finite_or_non_numeric_intent_named(self):
        with pytest.raises(ChunkError, match=r"intent\[1\] is not finite"):
            make_chunk(intent=[0.0, np.inf])
        with pytest.raises(ChunkError, match="intent must be numeric"):
            make_chunk(intent=np.array(["a", "b"]))

    def test_from_times_and_replace_keep_it(self):
        import dataclasses

        c = ActionChunk.from_times([1.0, 1.1], np.zeros((2, 1)), intent=[0.25])
        np.testing.assert_array_equal(dataclasses.replace(c, step0=3).intent, [0.25])


class TestFromTimes:
    def test_even_times(self):
        c = ActionChunk.from_times([1.0, 1.1, 1.2], np.zeros((3, 2)), obs_time=0.95)
        assert c.t0 == 1.0 and c.dt == pytest.approx(0.1) and c.obs_time == 0.95

    def test_decreasing_times_rejected(self):
        with pytest.raises(ChunkError, match=r"must increase: time\[2\]"):
            ActionChunk.from_times([1.0, 1.1, 1.05], np.zeros((3, 2)))

    def test_uneven_times_rejected(self):
        with pytest.raises(ChunkError, match="evenly spaced"):
            ActionChunk.from_times([1.0, 1.1, 1.5], np.zeros((3, 2)))

    def test_count_mismatch(self):
        with pytest.raises(ChunkError, match="one time per row"):
            ActionChunk.from_times([1.0, 1.1], np.zeros((3, 2)))

    def test_single_row_needs_dt(self):
        with pytest.raises(ChunkError, match="explicit dt"):
            ActionChunk.from_times([1.0], np.zeros((1, 2)))
        assert ActionChunk.from_times([1.0], np.zeros((1, 2)), dt=0.05).dt == 0.05
