"""The edit-observation builder: layout, semantics, and numpy == torch bitwise."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgerl.contract.edit_obs import (
    EditObsConfig,
    build_edit_obs,
    compose_edit_action,
    select_chunk_rows,
)
from edgerl.contract.serde import SchemaError

CFG = EditObsConfig(obs_dim=3, action_dim=2, lookahead=2, n_committed=2, age_scale_s=0.3,
                    age_clip=4.0)


def random_inputs(rng: np.random.Generator, batch: int, horizon: int = 6):
    obs = rng.standard_normal((batch, CFG.obs_dim)).astype(np.float32)
    chunks = rng.standard_normal((batch, horizon, CFG.action_dim)).astype(np.float32)
    index = rng.integers(0, horizon + 3, size=batch)
    age = rng.uniform(-0.1, 2.0, size=batch).astype(np.float32)
    committed = rng.standard_normal((batch, CFG.n_committed, CFG.action_dim)).astype(np.float32)
    has = (rng.random(batch) > 0.2).astype(np.float32)
    return obs, chunks, index, age, committed, has


def test_layout_and_dim():
    names = [n for n, _, _ in CFG.layout()]
    assert names == ["obs", "chunk_now", "chunk_next", "chunk_age", "committed", "has_chunk"]
    assert CFG.dim == 3 + 2 + 4 + 1 + 4 + 1
    assert CFG.layout()[-1][2] == CFG.dim


def test_single_sample_values():
    obs = np.array([1.0, 2.0, 3.0], np.float32)
    chunk = np.array([[10, 11], [20, 21], [30, 31]], np.float32)
    rows = select_chunk_rows(chunk, np.array(1), CFG.n_rows)
    np.testing.assert_array_equal(rows, [[20, 21], [30, 31], [30, 31]])  # last row holds
    committed = np.array([[5, 6], [7, 8]], np.float32)
    out = build_edit_obs(obs, rows, np.float32(0.6), committed, np.float32(1.0), CFG)
    expected = [1, 2, 3, 20, 21, 30, 31, 30, 31, 2.0, 5, 6, 7, 8, 1]
    np.testing.assert_array_equal(out, np.array(expected, np.float32))


def test_no_chunk_zeroes_chunk_segments_and_age_is_clipped():
    rows = np.full((CFG.n_rows, 2), 9.0, np.float32)
    out = build_edit_obs(np.zeros(3, np.float32), rows, np.float32(100.0),
                         np.zeros((2, 2), np.float32), np.float32(0.0), CFG)
    seg = {n: (a, b) for n, a, b in CFG.layout()}
    assert not out[seg["chunk_now"][0]:seg["chunk_next"][1]].any()
    assert out[seg["chunk_age"][0]] == 0.0 and out[seg["has_chunk"][0]] == 0.0
    out = build_edit_obs(np.zeros(3, np.float32), rows, np.float32(100.0),
                         np.zeros((2, 2), np.float32), np.float32(1.0), CFG)
    assert out[seg["chunk_age"][0]] == np.float32(CFG.age_clip)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numpy_and_torch_are_bitwise_equal(seed):
    obs, chunks, index, age, committed, has = random_inputs(np.random.default_rng(seed), 257)
    rows_np = select_chunk_rows(chunks, index, CFG.n_rows)
    out_np = build_edit_obs(obs, rows_np, age, committed, has, CFG)
    t = torch.from_numpy
    rows_t = select_chunk_rows(t(chunks), t(index), CFG.n_rows)
    out_t = build_edit_obs(t(obs), rows_t, t(age), t(committed), t(has), CFG)
    assert out_t.dtype == torch.float32 and out_np.dtype == np.float32
    assert out_np.shape == (257, CFG.dim)
    assert out_np.tobytes() == out_t.numpy().tobytes()
    # and each batch row equals the runtime's single-sample call
    for i in (0, 100, 256):
        single = build_edit_obs(obs[i], select_chunk_rows(chunks[i], index[i], CFG.n_rows),
                                age[i], committed[i], has[i], CFG)
        assert single.tobytes() == out_np[i].tobytes()


def test_preallocated_out_is_filled_in_place():
    obs, chunks, index, age, committed, has = random_inputs(np.random.default_rng(3), 1)
    buf = np.full(CFG.dim, np.nan, np.float32)
    rows = select_chunk_rows(chunks[0], index[0], CFG.n_rows)
    res = build_edit_obs(obs[0], rows, age[0], committed[0], has[0], CFG, out=buf)
    assert res is buf and np.isfinite(buf).all()
    with pytest.raises(ValueError, match="out has shape"):
        build_edit_obs(obs[0], rows, age[0], committed[0], has[0], CFG,
                       out=np.empty(3, np.float32))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"obs": np.zeros(4, np.float32)}, "obs has 4 elements"),
    ({"chunk_rows": np.zeros((2, 2), np.float32)}, "chunk_rows has shape"),
    ({"committed": np.zeros((3, 2), np.float32)}, "committed has shape"),
])
def test_wrong_shapes_are_named(kwargs, message):
    args = dict(obs=np.zeros(3, np.float32), chunk_rows=np.zeros((3, 2), np.float32),
                chunk_age_s=np.float32(0), committed=np.zeros((2, 2), np.float32),
                has_chunk=np.float32(1), cfg=CFG)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        build_edit_obs(**args)


def test_config_validation():
    with pytest.raises(SchemaError, match="edit_obs.obs_dim"):
        EditObsConfig(obs_dim=0, action_dim=1)
    with pytest.raises(SchemaError, match="edit_obs.lookahead"):
        EditObsConfig(obs_dim=1, action_dim=1, lookahead=-1)


def test_compose_bounds_the_residual_and_matches_torch():
    row = np.array([0.5, -0.5], np.float32)
    residual = np.array([100.0, -0.25], np.float32)
    out = compose_edit_action(row, residual, 0.2)
    np.testing.assert_allclose(out, [0.7, -0.55], rtol=0, atol=1e-7)
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((64, 2)).astype(np.float32)
    res = (rng.standard_normal((64, 2)) * 3).astype(np.float32)
    a_np = compose_edit_action(rows, res, 0.3)
    a_t = compose_edit_action(torch.from_numpy(rows), torch.from_numpy(res), 0.3)
    assert np.abs(a_np - rows).max() <= np.float32(0.3) + 1e-7
    assert a_np.tobytes() == a_t.numpy().tobytes()


SPLIT = EditObsConfig(obs_dim=5, action_dim=2, lookahead=2, n_committed=2, age_scale_s=0.3,
                      age_clip=4.0, obs_indices=[0, 2, 3])


class TestInformationSplit:
    """The edit policy reads only the fast subset of the robot observation."""

    def test_layout_counts_only_the_fast_elements(self):
        assert SPLIT.fast_dim == 3 and not SPLIT.full_observation
        assert SPLIT.dim == 3 + 2 + 4 + 1 + 4 + 1
        assert SPLIT.layout()[0] == ("obs", 0, 3)
        assert EditObsConfig(5, 2, obs_indices=[0, 1, 2, 3, 4]).full_observation

    def test_planner_only_elements_never_reach_the_edit_input(self):
        rng = np.random.default_rng(3)
        obs = rng.standard_normal((4, 5)).astype(np.float32)
        chunks = rng.standard_normal((4, 6, 2)).astype(np.float32)
        rows = select_chunk_rows(chunks, np.zeros(4, np.int64), SPLIT.n_rows)
        committed = np.zeros((4, 2, 2), np.float32)
        args = (rows, np.full(4, 0.1, np.float32), committed, np.ones(4, np.float32), SPLIT)
        out = build_edit_obs(obs, *args)
        np.testing.assert_array_equal(out[:, :3], obs[:, [0, 2, 3]])
        changed = obs.copy()
        changed[:, [1, 4]] = 1e6  # the planner-only elements: the goal, a camera's target
        assert build_edit_obs(changed, *args).tobytes() == out.tobytes()

    @pytest.mark.parametrize("seed", [0, 1])
    def test_numpy_single_samples_torch_batch_bitwise(self, seed):
        rng = np.random.default_rng(seed)
        obs = rng.standard_normal((8, 5)).astype(np.float32)
        chunks = rng.standard_normal((8, 6, 2)).astype(np.float32)
        index = rng.integers(0, 8, size=8)
        age = rng.uniform(0, 2, size=8).astype(np.float32)
        committed = rng.standard_normal((8, 2, 2)).astype(np.float32)
        has = np.ones(8, np.float32)
        t_rows = select_chunk_rows(torch.from_numpy(chunks), torch.from_numpy(index), 3)
        batch = build_edit_obs(torch.from_numpy(obs), t_rows, torch.from_numpy(age),
                               torch.from_numpy(committed), torch.from_numpy(has), SPLIT)
        out = np.empty(SPLIT.dim, np.float32)  # the runtime's preallocated buffer
        for i in range(8):
            rows = select_chunk_rows(chunks[i], index[i], 3)
            build_edit_obs(obs[i], rows, age[i], committed[i], has[i], SPLIT, out=out)
            assert out.tobytes() == batch[i].numpy().tobytes()

    @pytest.mark.parametrize("indices, message", [([2, 1], "ascending"), ([0, 0], "unique"),
                                                  ([0, 5], "within"), ([-1], "within")])
    def test_bad_indices_are_named(self, indices, message):
        with pytest.raises(SchemaError, match="edit_obs.obs_indices"):
            EditObsConfig(5, 2, obs_indices=indices)
