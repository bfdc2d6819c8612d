"""The interleaved benchmark of ``edgerl hil --rt-priority`` against ``edgerl bench serial``
(:mod:`edgerl.bench.hil.rt_ratio`, ``python -m edgerl.apps.experiments.probes.hil_rt_ratio``):
the script's arithmetic and output, and the real-time threads of other processes it reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from edgerl.bench.hil import rt_ratio as ratio

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.hil
@pytest.mark.slow
def test_interleaved_benchmark_prints_the_ratio_per_run_and_a_summary():
    pytest.importorskip("torch", reason="edgerl hil steps a torch plant")
    res = subprocess.run([sys.executable, "-m", "edgerl.apps.experiments.probes.hil_rt_ratio",
                          "--runs", "1", "--count", "200", "--paced-count", "50",
                          "--episodes", "1", "--max-steps", "60"],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    assert res.returncode == 0, res.stderr[-2000:]
    run, summary = (json.loads(line) for line in res.stdout.strip().splitlines())
    # the 2x goal is judged against the paced reference (the HIL's traffic), b2b beside it
    assert run["pace_hz"] == 50.0
    assert run["ratio"] == pytest.approx(run["hil_p99_us"] / run["bench_paced_p99_us"],
                                         rel=1e-2)
    assert run["ratio_b2b"] == pytest.approx(run["hil_p99_us"] / run["bench_b2b_p99_us"],
                                             rel=1e-2)
    assert run["met_2x"] == (run["ratio"] <= 2.0) and isinstance(run["rt_granted"], bool)
    assert run["met_2x_b2b"] == (run["ratio_b2b"] <= 2.0)
    assert run["gc_frozen"] is True and run["hil_rtt_samples"] > 10
    assert summary["runs"] == 1 and summary["met"] == int(run["met_2x"])
    assert summary["met_b2b"] == int(run["met_2x_b2b"])
    assert summary["ratios"] == [run["ratio"]] and summary["ratios_b2b"] == [run["ratio_b2b"]]
    assert isinstance(run["other_rt"], dict)
    assert summary["runs_without_other_rt"] == int(not run["other_rt"])
    assert summary["met_without_other_rt"] == int(run["met_2x"] and not run["other_rt"])


def test_other_rt_threads_lists_a_process_that_outranks_the_benchmark():
    code = ("import os, sys, time\n"
            "try:\n    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(30))\n"
            "except OSError:\n    sys.exit(3)\n"
            "print('up', flush=True)\ntime.sleep(5)\n")
    proc = subprocess.Popen([sys.executable, "-c", code],
                            stdout=subprocess.PIPE, text=True)
    try:
        if proc.stdout.readline().strip() != "up":
            pytest.skip("SCHED_FIFO not permitted here")
        above_20 = ratio.other_rt_threads(20)
        with ratio.watch_rt(20, interval_s=0.05) as seen:
            pass
        key = f"{proc.pid} "
        assert [prio for name, prio in above_20.items() if name.startswith(key)] == [30]
        assert [prio for name, prio in seen.items() if name.startswith(key)] == [30]
        assert not any(name.startswith(key) for name in ratio.other_rt_threads(30))
    finally:
        proc.kill()
        proc.wait()
