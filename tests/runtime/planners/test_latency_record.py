"""Latency model files: measured -> written -> read back by training."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from edgerl.contract.serde import SchemaError
from edgerl.runtime.planners.latency_model import latency_model_from_samples, save_latency_model
from edgerl.runtime.planners.latency_record import (
    chunk_latencies_from_recording,
    load_latency_file,
    measure_latency,
    save_latency_file,
)


def test_measure_save_and_load_round_trip(tmp_path):
    lat = np.array([0.031, 0.035, 0.052, 0.038, np.nan])  # 50 Hz: D = 2, 2, 3, 2
    m = measure_latency(lat, 50.0, period_steps=4, source="deploy")
    assert m.samples == 4 and m.latency.delay_distribution == [0.0, 0.0, 0.75, 0.25]
    assert m.latency.planner_delay_steps == 2 and m.latency.planner_period_steps == 4
    assert m.p50_ms == pytest.approx(36.5)
    path = save_latency_file(m, tmp_path / "lat.json")
    assert json.loads(path.read_text())["control_hz"] == 50.0
    assert load_latency_file(path) == m


def test_bare_bench_planner_model_is_accepted(tmp_path):
    model = latency_model_from_samples(np.array([0.03, 0.05]), 0.02, period_steps=3)
    m = load_latency_file(save_latency_model(model, tmp_path / "bare.json"))
    assert m.latency == model and m.control_hz is None and m.source == "bare.json"


def test_bad_files_and_samples_name_the_problem(tmp_path):
    (tmp_path / "x.json").write_text('{"latency": {"planner_period_steps": 0}}')
    with pytest.raises(SchemaError, match="planner_period_steps: must be >= 1"):
        load_latency_file(tmp_path / "x.json")
    (tmp_path / "y.json").write_text("not json")
    with pytest.raises(SchemaError, match="y.json: not a readable latency model file"):
        load_latency_file(tmp_path / "y.json")
    with pytest.raises(ValueError, match="hil: no planner latency was measured"):
        measure_latency(np.array([]), 50.0, 1, "hil")
    with pytest.raises(ValueError, match="1 negative latencies"):
        measure_latency(np.array([0.01, -0.01]), 50.0, 1, "deploy")


def _msg(stamp_ns: int):
    stamp = SimpleNamespace(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)
    return SimpleNamespace(header=SimpleNamespace(stamp=stamp))


def test_chunk_latencies_are_arrival_minus_stamp():
    t = 1_700_000_000_000_000_000
    data = {"/planner/chunk": [(t + 40_000_000, _msg(t)),
                               (t + 1_250_000_000, _msg(t + 10 ** 9))]}
    np.testing.assert_allclose(chunk_latencies_from_recording(data), [0.04, 0.25])
    with pytest.raises(ValueError, match="has no /planner/chunk messages"):
        chunk_latencies_from_recording({"/robot/command": []})
