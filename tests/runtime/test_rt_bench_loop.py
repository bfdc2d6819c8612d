"""``edgerl bench loop`` end to end on a real bundle (short run)."""

from __future__ import annotations

import json

from edgerl.cli import main

KEYS = {"rate_hz", "ticks", "tick_compute_p50_us", "tick_compute_p99_us", "jitter_p50_us",
        "jitter_p99_us", "deadline_misses", "max_late_us"}


def test_bench_loop_json(make_bundle, capsys, tmp_path):
    bundle = make_bundle("b", control_hz=200.0, horizon=20, chunk_dt=0.01, period_s=0.05)
    rc = main(["bench", "loop", "--bundle", str(bundle), "--rate", "250", "--seconds", "0.6",
               "--warmup", "0.2", "--planner-latency-ms", "5", "--json",
               "--save-json", str(tmp_path / "h.json")])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= KEYS
    assert out["rate_hz"] == 250.0 and out["planner"] == "burn"
    assert 100 <= out["ticks"] + out["skipped_ticks"] <= 160
    assert out["states"]["ok"] >= 0.8 * out["ticks"]
    assert out["planner_stats"]["chunks"] >= 3
    assert 0 < out["tick_compute_p50_us"] <= out["tick_compute_p99_us"]
    saved = json.loads((tmp_path / "h.json").read_text())
    assert saved["bench"]["ticks"] == out["ticks"]


def test_bench_loop_bad_bundle(tmp_path, capsys):
    rc = main(["bench", "loop", "--bundle", str(tmp_path / "nope"), "--seconds", "0.1"])
    assert rc == 2  # every verb exits 2 on a refused bundle (docs/export.md)
    assert "bundle directory not found" in capsys.readouterr().err
