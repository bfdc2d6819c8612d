"""``edgerl bench serial``: round trips over the pty and the watchdog's safe-entry latency."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.hil


def test_bench_serial_json_reports_round_trips_and_watchdog_latency(fw_binaries):
    res = subprocess.run([sys.executable, "-m", "edgerl.apps", "bench", "serial", "--count", "100",
                          "--watchdog-ms", "30", "--watchdog-trials", "4", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert out["round_trips"] == 100 and out["lost"] == 0
    assert 0 < out["cmd_rtt_p50_us"] <= out["cmd_rtt_p99_us"] <= out["cmd_rtt_max_us"]
    # every trial's safe state comes after the watchdog period, never before (a stale SAFE
    # sample from the previous trial would give a negative latency)
    assert out["watchdog_trials"] == 4
    assert 30.0 <= out["safe_entry_ms_p50"] <= out["safe_entry_ms_max"] < 30.0 + 250.0
    assert 30.0 <= out["fw_safe_entry_ms_max"] < 30.0 + 250.0


def test_bench_serial_paced_sends_one_round_trip_per_grid_tick(fw_binaries):
    # 30 round trips (+5 warm-up) on a 100 Hz grid take >= 0.34 s; back to back they take
    # a few ms
    res = subprocess.run([sys.executable, "-m", "edgerl.apps", "bench", "serial", "--count", "30",
                          "--warmup", "5", "--pace-hz", "100", "--watchdog-trials", "0",
                          "--json"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert out["round_trips"] == 30 and out["lost"] == 0 and out["pace_hz"] == 100.0
    assert out["round_trip_wall_s"] >= 0.34


def test_bench_serial_rejects_a_bad_pace():
    res = subprocess.run([sys.executable, "-m", "edgerl.apps", "bench", "serial", "--pace-hz",
                          "-1"], capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and "--pace-hz must be in 0..10000" in res.stderr


def test_bench_serial_on_the_qemu_m4_firmware():
    from tests.helpers.qemu import require_qemu

    require_qemu()
    res = subprocess.run([sys.executable, "-m", "edgerl.apps", "bench", "serial", "--target",
                          "qemu-m4", "--count", "30", "--warmup", "5", "--watchdog-ms", "30",
                          "--watchdog-trials", "2", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert out["target"] == "qemu-m4" and out["round_trips"] == 30 and out["lost"] == 0
    assert 0 < out["cmd_rtt_p50_us"] <= out["cmd_rtt_p99_us"]
    assert out["watchdog_trials"] == 2 and 30.0 <= out["fw_safe_entry_ms_max"] < 30.0 + 250.0
