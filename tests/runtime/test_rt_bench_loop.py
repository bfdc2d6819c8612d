"""``edgerl bench loop`` end to end on a real bundle (short run)."""

from __future__ import annotations

import json

from edgerl.apps.cli import main

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


def test_bench_loop_pins_the_loop_and_the_planner_process(make_bundle, capsys):
    """``--loop-cpus`` / ``--planner-cpus``: the JSON says where the loop thread and the
    planner (client thread, and the process it spawns) were pinned."""
    import os

    import pytest

    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("needs Linux sched_setaffinity")
    cpu = min(os.sched_getaffinity(0))
    bundle = make_bundle("b", control_hz=200.0, horizon=20, chunk_dt=0.01, period_s=0.05)
    rc = main(["bench", "loop", "--bundle", str(bundle), "--rate", "250", "--seconds", "0.3",
               "--warmup", "0.1", "--planner-latency-ms", "5", "--planner-process",
               "--loop-cpus", str(cpu), "--planner-cpus", str(cpu), "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["loop_cpus"] == [cpu] and out["planner_cpus"] == [cpu]
    assert out["planner_stats"]["chunks"] >= 1


def test_bench_loop_names_a_bad_cpu_list(make_bundle, capsys):
    import os

    bundle = make_bundle("b", control_hz=200.0, horizon=20, chunk_dt=0.01, period_s=0.05)
    assert main(["bench", "loop", "--bundle", str(bundle), "--loop-cpus", "x"]) != 0
    assert "CPU list 'x': 'x' is not a CPU number" in capsys.readouterr().err
    if hasattr(os, "sched_setaffinity"):
        absent = max(os.sched_getaffinity(0)) + 4096
        assert main(["bench", "loop", "--bundle", str(bundle), "--planner-cpus",
                     str(absent)]) != 0
        assert f"--planner-cpus [{absent}]: CPU {absent} is not available" in \
            capsys.readouterr().err
