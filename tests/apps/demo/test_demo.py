"""``edgerl demo``: the whole pipeline end to end (slow), plus its cheap failure paths."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgerl.apps.demo.config import DemoError
from edgerl.apps.demo.pipeline import MARKER, prepare_out, timing_table
from edgerl.apps.demo.report import command_smoothness, timing_rows

REPO = Path(__file__).resolve().parents[3]


def _edgerl(*argv: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "edgerl.apps", "--log-level", "WARNING", *argv],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_out_dir_refuses_foreign_and_replaces_own(tmp_path: Path) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("x")
    with pytest.raises(DemoError, match="not an edgerl demo output"):
        prepare_out(foreign)
    assert (foreign / "thesis.tex").read_text() == "x"
    own = prepare_out(tmp_path / "demo")
    (own / "bundle").mkdir()
    (own / "bundle" / "old.onnx").write_text("old")
    prepare_out(own)
    assert (own / MARKER).exists() and not (own / "bundle").exists()


def test_cli_rejects_unknown_task_and_foreign_out(tmp_path: Path) -> None:
    r = _edgerl("demo", "--task", "no_such_task", "--out", str(tmp_path / "d"), timeout=120)
    assert r.returncode == 1 and "no_such_task" in r.stderr
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "a.txt").write_text("keep")
    r = _edgerl("demo", "--fast", "--out", str(tmp_path / "f"), timeout=120)
    assert r.returncode == 1 and "not an edgerl demo output" in r.stderr
    assert (tmp_path / "f" / "a.txt").read_text() == "keep"


def test_timing_table_rows_format_numbers() -> None:
    t = timing_table({"ticks": 250.0, "tick_compute_p50_us": 370.25, "deadline_misses": 3.0},
                     {"e2e_latency_p50_us": 24768.2}, {"cmd_rtt_p50_us": 850.0})
    rows = {r["metric"]: r for r in timing_rows(t)}
    assert rows["edit tick compute (us)"]["p50"] == "370.2"
    assert rows["edit tick compute (us)"]["p99"] == "-"
    assert rows["deadline misses (ticks)"]["p50"] == "3"
    assert rows["deadline misses (ticks)"]["p99"] == "of 250"
    assert rows["state -> command e2e (ms)"]["p50"] == "24.77"
    assert rows["HIL command RTT (ms)"]["p50"] == "0.85"


def test_command_smoothness_counts_chatter_and_steps() -> None:
    chatter = np.array([[0.3], [-0.3], [0.3], [-0.3], [0.3]])
    c = command_smoothness(chatter)
    assert c["ticks"] == 5 and c["sign_change_fraction"] == 1.0
    assert c["mean_abs_u"] == pytest.approx(0.3) and c["mean_abs_du"] == pytest.approx(0.6)
    ramp = np.column_stack([np.linspace(0.0, 1.0, 11), np.full(11, -0.5)])
    r = command_smoothness(ramp)
    assert r["sign_change_fraction"] == 0.0 and r["mean_abs_du"] == pytest.approx(0.05)
    # rows with a NaN (a command with fewer fields than names) are left out, one row -> NaN rates
    one = command_smoothness(np.array([[0.2], [np.nan]]))
    assert one["ticks"] == 1 and np.isnan(one["mean_abs_du"])


@pytest.mark.slow
@pytest.mark.ros
@pytest.mark.hil
def test_demo_fast_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    # the classic cartpole keeps this pipeline check cheap (60 PPO iterations balance it);
    # the default planner-needed task needs ~160 (docs/demo.md)
    r = _edgerl("demo", "--fast", "--task", "cartpole", "--iterations", "60",
                "--naive-iterations", "4",
                "--episodes", "16", "--deploy-s", "3", "--no-progress", "--json",
                "--out", str(out), timeout=600)
    assert r.stdout.strip(), r.stderr[-3000:]
    rep = json.loads(r.stdout)
    for key in ("ok", "exit_code", "hil_success", "deploy_success", "export_ok", "stages",
                "success_rates", "loop_timing", "artifacts", "hil", "deploy", "total_s"):
        assert key in rep, key
    assert r.returncode == rep["exit_code"] == (0 if rep["hil_success"] else 2)
    assert rep["hil_success"] is True, rep["stages"]
    assert rep["hil"]["success"] == 1.0 and rep["hil"]["estop_ok"] is True
    assert rep["hil"]["corrupted_executed"] == 0
    assert rep["export_ok"] is True
    assert all(p["ok"] and p["max_abs_err"] < 1e-4 for p in rep["export"]["parity"].values())
    stages = [s["stage"] for s in rep["stages"]]
    assert stages[0] == "train edit" and "HIL (firmware on pty)" in stages
    assert "ROS 2 deploy" in stages and "evaluate vs baselines" in stages
    rates = {row["method"]: row for row in rep["success_rates"]}
    assert set(rates) == {"edit", "edit_zero_chunks", "planner", "naive"}
    assert all(0.0 <= row["success_rate"] <= 1.0 and row["episodes"] == 16
               and row["action_rate"] >= 0.0 for row in rates.values())
    cmd = rep["deploy_command"]
    assert cmd["ticks"] > 50 and 0.0 <= cmd["sign_change_fraction"] <= 1.0
    assert cmd["mean_abs_du"] >= 0.0 and cmd["mean_abs_u"] > 0.0
    assert rep["delay_ms"] == pytest.approx(200.0)
    assert rep["deploy"]["planner_extra_latency_s"] == pytest.approx(0.2)
    # the edit node never latched the e-stop (it did at start-up, before the robot's first
    # state, and every deployed episode then failed)
    assert rep["deploy"]["edit_estop_ticks"] == 0, rep["deploy"].get("edit_loop_state")
    lt = rep["loop_timing"]
    assert 0 < lt["tick_compute_p50_us"] <= lt["tick_compute_p99_us"] < 1e6
    assert lt["ticks"] > 50 and lt["hil_cmd_rtt_p50_us"] > 0
    art = rep["artifacts"]
    assert (Path(art["bundle"]) / "manifest.json").is_file()
    assert (Path(art["bundle"]) / "planner.onnx").is_file()
    assert Path(art["recording"]).stat().st_size > 1000
    png = Path(art["png"]).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) < 400_000
    assert json.loads(Path(art["report"]).read_text())["exit_code"] == rep["exit_code"]
