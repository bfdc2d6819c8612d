"""`edgerl soak`: its checks on hand-made inputs, and a short real soak (sim robot, planner,
edit node over rclpy at 500 Hz with planner kills and bad messages on every topic, plus the
firmware host build on a pty with corruption and unplugs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgerl.apps.cli import main
from edgerl.apps.soak import SoakConfig, SoakError
from edgerl.apps.soak.procs import RssTrack, rss_mb
from edgerl.apps.soak.serial_leg import SerialTotals
from edgerl.apps.soak.watch import CommandWatch, DiagTotals


class _Msg:
    def __init__(self, names, effort):
        self.name, self.effort = names, effort


def _watch() -> CommandWatch:
    return CommandWatch(["a", "b"], np.array([-1.0, -2.0]), np.array([1.0, 2.0]),
                        np.zeros(2), "effort", lambda info: info["gid"] == "ours")


def _info(sent_ns: int = 0, gid: str = "ours") -> dict:
    return {"gid": gid, "source_timestamp": sent_ns}


class TestCommandWatch:
    def test_counts_each_unsafe_kind_and_ignores_foreign(self):
        w = _watch()
        w.on_command(_Msg(["a", "b"], [0.5, -1.5]), _info())
        w.on_command(_Msg(["a", "b"], [np.nan, 0.0]), _info())
        w.on_command(_Msg(["a", "b"], [1.5, 0.0]), _info())
        w.on_command(_Msg(["a"], [0.0]), _info())
        w.on_command(_Msg(["a", "b"], [np.inf, 9.0]), _info(gid="someone else"))
        assert w.commands == 4 and w.foreign == 1
        assert dict(w.unsafe) == {"nonfinite": 1, "outside_limits": 1, "wrong_size": 1}
        assert w.unsafe_total == 3

    def test_after_an_estop_report_only_the_safe_action_is_safe(self):
        w = _watch()
        w.set_estopped(True, report_ns=1000)
        w.set_estopped(True, report_ns=2000)  # still latched: the first report counts
        w.on_command(_Msg(["a", "b"], [0.3, 0.0]), _info(999))  # sent before the report
        w.on_command(_Msg(["a", "b"], [0.0, 0.0]), _info(1001))
        w.on_command(_Msg(["a", "b"], [0.2, 0.0]), _info(1500))
        w.set_estopped(False, report_ns=3000)
        w.on_command(_Msg(["a", "b"], [0.2, 0.0]), _info(3001))
        assert w.commands_while_estopped == 2
        assert dict(w.unsafe) == {"not_safe_while_estopped": 1}


    def test_an_operator_rearm_ends_the_latch_and_older_reports_do_not_revive_it(self):
        w = _watch()
        w.set_estopped(True, report_ns=1000)
        w.rearmed(at_ns=5000)
        w.set_estopped(True, report_ns=4000)  # published before the re-arm: ignored
        w.on_command(_Msg(["a", "b"], [0.4, 0.0]), _info(5100))  # the loop runs again
        assert w.commands_while_estopped == 0 and not w.unsafe
        # published after the re-arm, before the node applied it (its counter still 0)
        w.set_estopped(True, report_ns=5050, resets=0)
        w.on_command(_Msg(["a", "b"], [0.4, 0.0]), _info(5200))
        assert w.commands_while_estopped == 0 and not w.unsafe
        w.set_estopped(True, report_ns=6000, resets=1)  # latched again after the re-arm
        w.on_command(_Msg(["a", "b"], [0.4, 0.0]), _info(6100))
        assert dict(w.unsafe) == {"not_safe_while_estopped": 1}

    def test_a_lost_rearm_is_judged_again_after_the_grace(self):
        from edgerl.apps.soak.watch import REARM_GRACE_NS

        w = _watch()
        w.set_estopped(True, report_ns=1000)
        w.rearmed(at_ns=5000)
        late = 5000 + REARM_GRACE_NS + 1  # the node never applied it: still latched
        w.set_estopped(True, report_ns=late, resets=0)
        w.on_command(_Msg(["a", "b"], [0.4, 0.0]), _info(late + 100))
        assert dict(w.unsafe) == {"not_safe_while_estopped": 1}


def test_diag_totals_bank_counters_across_a_restart():
    d = DiagTotals()
    d.update("edgerl: planner_node", {"dropped_bad_msgs": "7", "dropped robot/x nan": "7"})
    d.update("edgerl: planner_node", {"dropped_bad_msgs": "2"})  # restarted process
    d.update("edgerl: edit_policy_node", {"dropped_bad_msgs": "5", "state": "estop"})
    assert d.total("dropped_bad_msgs") == 14
    assert d.total("dropped_bad_msgs", "edgerl: planner_node") == 9
    assert d.by_prefix("dropped ") == {"planner_node dropped robot/x nan": 7}
    assert d.states_seen["edgerl: edit_policy_node"] == {"estop"}


def test_rss_track_skips_warmup_and_takes_the_worst_incarnation():
    r = RssTrack(warmup_s=5.0)
    r.add(10, 1.0, 0.0)  # loading: not kept
    r.add(10, 100.0, 5.0)
    r.add(10, 103.0, 30.0)
    r.add(10, 110.0, 60.0)  # keeps growing: 103 -> 110 in its second half
    r.add(11, 20.0, 61.0)  # the restarted process, loading: not kept
    r.add(11, 90.0, 70.0)
    r.add(11, 96.0, 80.0)
    s = r.summary()
    assert s["processes"] == 2 and s["first_mb"] == 100.0 and s["last_mb"] == 96.0
    assert s["growth_mb"] == 10.0 and s["growth_2nd_half_mb"] == 7.0
    assert s["peak_mb"] == 110.0
    assert rss_mb(1 << 30) != rss_mb(1 << 30)  # NaN for a pid that does not exist


def test_serial_totals_fold_hil_results():
    t = SerialTotals()
    t.add({"corrupted_executed": 0, "estop_ok": True, "watchdog_trips": 2,
           "unplugs": [{"safe_entry_ms": 104.0, "link_down_ms": 410.0}]})
    t.add({"corrupted_executed": 1, "estop_ok": None, "estop_skipped": "link down"})
    assert (t.runs, t.corrupted_executed, t.estop_ok, t.estop_skipped) == (2, 1, 1, 1)
    assert t.unplugs == 1 and t.unplug_safe_entry_ms == [104.0] and t.link_down_ms == [410.0]


@pytest.mark.parametrize("field, value, text", [
    ("minutes", 0.0, "--minutes"), ("rate_hz", 0.0, "--rate-hz"),
    ("rt_priority", 99, "--rt-priority"), ("bad_hz", -1.0, "--bad-hz"),
    ("kill_every_s", -1.0, "--kill-every"), ("bundle", Path("/nonexistent"), "manifest.json"),
])
def test_config_names_the_bad_option(tmp_path, field, value, text):
    (tmp_path / "manifest.json").write_text("{}")
    cfg = SoakConfig(bundle=tmp_path)
    setattr(cfg, field, value)
    with pytest.raises(SoakError, match=text):
        cfg.check()


def test_cli_rejects_a_missing_bundle_without_a_traceback(tmp_path, capsys):
    assert main(["soak", "--bundle", str(tmp_path / "none"), "--minutes", "0.1"]) == 1
    assert "no manifest.json" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.ros
@pytest.mark.hil
def test_short_soak_has_no_unsafe_command_and_no_crash(tmp_path):
    """~45 s of the real thing: 500 Hz graph, planner SIGKILLed twice and restarted, every
    topic fed bad messages, serial HIL with corruption and unplugs beside it."""
    proc = subprocess.run([sys.executable, "-c", "import rclpy, sensor_msgs.msg"],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        pytest.skip(f"rclpy not importable: {proc.stderr.strip()[-300:]}")
    from tests.helpers.task_bundles import write_task_bundle

    bundle = write_task_bundle(tmp_path / "bundle")
    out = subprocess.run(
        [sys.executable, "-m", "edgerl.apps", "soak", "--bundle", str(bundle), "--minutes", "0.75",
         "--kill-every", "12", "--bad-hz", "25", "--json"],
        capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stderr[-3000:] + out.stdout[-3000:]
    rep = json.loads(out.stdout)
    assert rep["verdict"] == "ok" and rep["unsafe_commands"] == 0 and rep["crashes"] == 0
    assert rep["rate_hz"] == 500.0 and rep["commands_checked"] > 1000
    # killed about every 12 s of 45 s (later under load), restarted each time
    assert 2 <= rep["planner_kills"] <= 3, rep
    assert rep["planner_restarts"] == rep["planner_kills"], rep["crash_logs"]
    for name in ("sim_robot_node", "planner_node", "edit_policy_node", "soak"):
        assert rep["rss"][name]["processes"] >= 1 and rep["rss"][name]["last_mb"] > 10
    # every topic got bad input, and the injected commands were not counted as ours
    topics = {k.split()[0] for k in rep["bad_sent_by_kind"]}
    assert topics == {"state", "chunk", "command", "instruction", "episode", "estop_reset",
                      "intervention"}
    assert rep["bad_sent"] >= 500 and rep["bad_refused"] > 0
    assert rep["commands_foreign"] >= rep["bad_sent_by_kind"]["command nan"]
    # valid commands from the soak's node never reached the robot; no unsigned or forged
    # operator message was accepted, each counted under its reason
    assert rep["commands_refused_foreign"] >= rep["bad_sent_by_kind"]["command foreign_valid"]
    assert rep["operator_unauthenticated_accepted"] == 0
    refused = rep["operator_refused_by_reason"]
    assert refused.get("edit_policy_node operator_refused unsigned", 0) >= 1, refused
    assert refused.get("edit_policy_node operator_refused bad_signature", 0) >= 1, refused
    assert set(rep["bad_refused_by_node"]) >= {"edit_policy_node", "planner_node",
                                               "sim_robot_node"}
    assert rep["serial"]["runs"] >= 1 and rep["serial"]["crashes"] == 0
    assert rep["serial"]["corrupted_executed"] == 0 and rep["serial"]["bad_frames"] > 0
    assert isinstance(rep["rt_permitted"], bool)
