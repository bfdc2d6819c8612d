"""edgerl.apps.experiments.probes.fuzz_inputs at a tiny n: the C and Python frame parsers and the
ROS message checks take every input without a crash and accept nothing illegal (the 10^6 run's
numbers are in docs/reliability.md, "Fuzzing")."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.hil, pytest.mark.ros]


def test_fuzz_inputs_table_and_json(fw_binaries):
    pytest.importorskip("rclpy")
    proc = subprocess.run([sys.executable, "-m", "edgerl.apps.experiments.probes.fuzz_inputs",
                           "--n", "1200", "--seed", "5", "--json"],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-2000:] + proc.stdout[-2000:]
    rows = {r["target"]: r for r in json.loads(proc.stdout)["results"]}
    assert set(rows) == {"c_frame_parser", "py_frame_parser", "ros_message_checks"}
    for r in rows.values():
        assert r["inputs"] == 1200 and r["rate_per_s"] > 0
        assert r["crashes"] == 0 and r["illegal_accepts"] == 0, r
    # the corpora exercise acceptance too, not only refusal
    assert rows["c_frame_parser"]["accepted_frames"] == rows["py_frame_parser"][
        "accepted_frames"] > 300
    assert 50 < rows["ros_message_checks"]["accepted_messages"] < 1200


def test_ros_target_counts_float32_overflow_as_an_illegal_accept(monkeypatch):
    """The ROS target is able to fail: with the overflow check removed (as it once was),
    accepted 1e39/1e308 values come back as inf and are counted."""
    pytest.importorskip("rclpy")
    from edgerl_ros import messages

    from edgerl.apps.experiments.probes import fuzz_inputs

    monkeypatch.setattr(messages, "F32_MAX", float("inf"))
    row = fuzz_inputs.fuzz_ros(3000, seed=1)
    assert row["crashes"] == 0 and row["illegal_accepts"] > 10
