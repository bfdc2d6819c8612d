"""Intervention recordings: MCAP write -> read round trip, and the collapse of state-echo
ticks into one transition per control step."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.contract.intervention import Intervention
from edgerl.contract.intervention_log import (
    RECORDING_FORMAT,
    InterventionRecorder,
    control_steps,
    load_transitions,
    read_recording,
    recording_format,
)


def _ticks(obs_rows, starts, episodes, d=5):
    n = len(obs_rows)
    edit = np.zeros((n, d), np.float32)
    edit[:, 0] = obs_rows
    edit[:, 1] = np.arange(n)  # a later segment that changes every tick (committed actions)
    return {"edit_obs": edit, "policy_out": np.arange(n, dtype=np.float32)[:, None],
            "residual": np.arange(n, dtype=np.float32)[:, None] + 0.5,
            "chunk_row": np.zeros((n, 1), np.float32),
            "command": np.arange(n, dtype=np.float32)[:, None] / 10,
            "intervened": np.asarray(starts, bool) | np.roll(starts, 1),
            "start": np.asarray(starts, bool), "episode": np.asarray(episodes, np.int64),
            "t": np.arange(n) * 0.01}


def test_record_read_round_trip(tmp_path):
    ticks = _ticks([0.1, 0.1, 0.2, 0.3], [False, True, False, False], [1, 1, 1, 2])
    path = tmp_path / "run.mcap"
    with InterventionRecorder(path, {"bundle": "b"}) as rec:
        rec.write_intervention(Intervention("override", 0.01, np.array([0.4], np.float32)))
        rec.write_ticks(ticks)
        rec.write_intervention(Intervention("release", 0.02))
    back, ivs = read_recording(path)
    assert recording_format(path) == RECORDING_FORMAT == 2
    for k, v in ticks.items():
        np.testing.assert_array_equal(back[k], v, err_msg=k)
    assert [(i.kind, i.stamp_s, i.command.tolist()) for i in ivs] == [
        ("override", 0.01, [pytest.approx(0.4)]), ("release", 0.02, [])]
    empty = tmp_path / "empty.mcap"
    InterventionRecorder(empty).close()
    with pytest.raises(ValueError, match="empty.mcap: no loop/tick messages"):
        read_recording(empty)


def test_a_format_1_recording_reads_the_residual_as_nan(tmp_path, monkeypatch):
    """Format 1 (no residual field, no format record) still loads (its rows are kept)."""
    import edgerl.contract.intervention_log as log

    ticks = _ticks([0.1, 0.2, 0.3], [False, True, False], [1, 1, 1])
    monkeypatch.setattr(log, "_VECTORS", ("edit_obs", "policy_out", "chunk_row", "command"))
    monkeypatch.setattr(log, "_FORMAT_RECORD", "not.the.format.record")
    path = tmp_path / "old.mcap"
    with InterventionRecorder(path) as rec:
        rec.write_ticks(ticks)
    monkeypatch.undo()
    back, _ = read_recording(path)
    assert recording_format(path) == 1
    assert back["residual"].shape == (3, 1) and np.isnan(back["residual"]).all()
    np.testing.assert_array_equal(back["policy_out"], ticks["policy_out"])
    assert len(load_transitions([path], fast_dim=1)["t"]) == 3


def test_a_newer_format_is_refused_with_its_number(tmp_path, monkeypatch):
    import edgerl.contract.intervention_log as log

    path = tmp_path / "future.mcap"
    monkeypatch.setattr(log, "RECORDING_FORMAT", 7)
    with InterventionRecorder(path) as rec:
        rec.write_ticks(_ticks([0.1], [False], [1]))
    monkeypatch.undo()
    with pytest.raises(ValueError, match="future.mcap: recording format 7 is newer than this "
                                         "reader's 2"):
        read_recording(path)


def test_control_steps_keep_the_last_tick_per_state(tmp_path):
    # ticks 0-2 saw state 0.1 (the override started at tick 1), 3 saw 0.2; episode 2 starts
    ticks = _ticks([0.1, 0.1, 0.1, 0.2, 0.2], [False, True, False, False, False],
                   [1, 1, 1, 1, 2])
    steps = control_steps(ticks, fast_dim=1)
    assert steps["edit_obs"][:, 0].tolist() == pytest.approx([0.1, 0.2, 0.2])
    assert steps["command"][:, 0].tolist() == pytest.approx([0.2, 0.3, 0.4])  # last ticks
    assert steps["start"].tolist() == [True, False, False]
    assert steps["done"].tolist() == [False, True, True]
    path = tmp_path / "a.mcap"
    with InterventionRecorder(path) as rec:
        rec.write_ticks(ticks)
    both = load_transitions([path, path], fast_dim=1)
    assert both["episode"].tolist() == [0, 0, 1, 2, 2, 3]  # unique across files
