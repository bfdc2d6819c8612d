"""The runtime's per-tick edit-observation writer and the numpy compose: bitwise what
``build_edit_obs`` / ``np.clip`` give, including the edge values (numpy only)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from edgerl.contract.edit_obs import (
    EditObsConfig,
    EditObsWriter,
    build_edit_obs,
    compose_edit_action,
)

SPECIAL = np.array([0.0, -0.0, 1e-45, -1.5, 3.9999, 4.0, 4.0001, 1e30, -1e30, np.inf, -np.inf,
                    np.nan], np.float32)


def _cases(cfg: EditObsConfig, seed: int, n: int = 300):
    rng = np.random.default_rng(seed)
    for i in range(n):
        obs = rng.standard_normal(cfg.obs_dim).astype(np.float32)
        rows = rng.standard_normal((cfg.n_rows, cfg.action_dim)).astype(np.float32)
        committed = rng.standard_normal((cfg.n_committed, cfg.action_dim)).astype(np.float32)
        if i % 3 == 0:  # special values in every segment
            obs[rng.integers(cfg.obs_dim)] = rng.choice(SPECIAL)
            rows.flat[rng.integers(rows.size)] = rng.choice(SPECIAL)
        age = float(rng.choice(SPECIAL)) if i % 2 else float(rng.uniform(-0.5, 3.0))
        yield obs, rows, age, committed, bool(i % 4)


@pytest.mark.parametrize("indices", [[], [0, 2]], ids=["full", "split"])
def test_writer_is_bitwise_build_edit_obs(indices):
    cfg = EditObsConfig(obs_dim=3, action_dim=2, lookahead=2, n_committed=2, age_scale_s=0.3,
                        age_clip=4.0, obs_indices=indices)
    out = np.full(cfg.dim, 7.0, np.float32)
    writer = EditObsWriter(cfg, out)
    for obs, rows, age, committed, has in _cases(cfg, seed=len(indices)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # inf * has 0 (both sides)
            ref = build_edit_obs(obs, rows, age, committed, 1.0 if has else 0.0, cfg)
            got = writer.write(obs, rows, age, committed, has)
        assert got is out
        assert got.tobytes() == ref.tobytes(), (obs, rows, age, committed, has, got, ref)


def test_writer_is_bitwise_build_edit_obs_with_an_intent():
    """The planner intent segment too: the chunk's intent where a chunk is used, +0.0 without
    one or without a chunk (so the bytes never depend on a stale chunk)."""
    cfg = EditObsConfig(obs_dim=3, action_dim=2, n_committed=1, obs_indices=[1], intent_dim=3)
    out = np.full(cfg.dim, 7.0, np.float32)
    writer = EditObsWriter(cfg, out)
    rng = np.random.default_rng(5)
    seen_used = seen_zero = 0
    for i, (obs, rows, age, committed, has) in enumerate(_cases(cfg, seed=9)):
        intent = None if i % 5 == 0 else rng.uniform(-1, 1, 3).astype(np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ref = build_edit_obs(obs, rows, age, committed, 1.0 if has else 0.0, cfg,
                                 intent=intent)
            got = writer.write(obs, rows, age, committed, has, intent)
        assert got.tobytes() == ref.tobytes(), (i, got, ref)
        seg = {name: got[a:b] for name, a, b in cfg.layout()}
        if has and intent is not None:
            assert np.array_equal(seg["intent"], intent)
            seen_used += 1
        else:
            assert seg["intent"].tobytes() == bytes(12)
            seen_zero += 1
        if not has:
            chunk = np.concatenate([seg["chunk_now"], seg["chunk_next"]])
            assert chunk.tobytes() == bytes(chunk.nbytes)
    assert seen_used > 100 and seen_zero > 50


def test_writer_refuses_a_wrong_buffer():
    cfg = EditObsConfig(obs_dim=3, action_dim=2)
    with pytest.raises(ValueError, match=r"out must be \(15,\) float32, got \(15,\) float64"):
        EditObsWriter(cfg, np.zeros(cfg.dim, np.float64))
    with pytest.raises(ValueError, match=r"out must be \(15,\) float32"):
        EditObsWriter(cfg, np.zeros((1, cfg.dim), np.float32))


def test_compose_is_bitwise_the_clip_formula():
    """chunk_row + bound * clip(residual, -1, 1), with inf, NaN, -0.0 and huge residuals."""
    rng = np.random.default_rng(3)
    residual = np.concatenate([SPECIAL, rng.standard_normal(500).astype(np.float32) * 3])
    row = rng.standard_normal(residual.shape).astype(np.float32)
    ref = row + np.float32(0.3) * np.clip(residual, np.float32(-1), np.float32(1))
    got = compose_edit_action(row, residual, 0.3, out=np.empty_like(residual))
    assert got.tobytes() == ref.tobytes()
