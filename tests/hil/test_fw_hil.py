"""The HIL harness and ``edgerl hil`` end to end (real time: keep runs short)."""

from __future__ import annotations

import json

import pytest

from edgerl.apps.cli import main
from edgerl.hil.faults import FaultSpec
from edgerl.hil.firmware import FirmwareConfig
from edgerl.hil.harness import HilConfig, run_hil

pytestmark = [pytest.mark.hil, pytest.mark.slow]


def test_fault_spec_parse_and_errors():
    f = FaultSpec.parse("corrupt=0.01, drop=0.002,garbage=2,freeze=1.5,unplug=2:0.25,seed=4")
    assert (f.corrupt, f.drop, f.garbage, f.freeze_at, f.freeze_s) == (0.01, 0.002, 2.0, 1.5,
                                                                       0.5)
    assert (f.unplug_at, f.unplug_s, f.seed) == (2.0, 0.25, 4)
    with pytest.raises(ValueError, match="unknown fault"):
        FaultSpec.parse("melt=1")
    with pytest.raises(ValueError, match=r"'corrupt=2'.*\[0, 1\]"):
        FaultSpec.parse("corrupt=2")
    with pytest.raises(ValueError, match="key=value"):
        FaultSpec.parse("freeze")


def test_tx_faults_corrupt_keeps_framing_and_records_the_setpoint():
    from edgerl.contract.wire import FrameParser, codec
    from edgerl.hil.faults import TxFaults

    frame = codec.encode("SETPOINT", 5, seq=77, n=1, q=[0.5])
    tx = TxFaults(FaultSpec(corrupt=1.0))
    bad = tx(frame)
    assert len(bad) == len(frame) and bad[-1] == 0 and 0 not in bad[:-1]
    assert all(a != b for a, b in zip(bad[:-1], frame[:-1]))
    parser = FrameParser()
    assert parser.feed(bad) == [] and parser.stats.bad_frames == 1
    assert tx.corrupted_frames == 1 and tx.corrupted_setpoints == {77}
    drop = TxFaults(FaultSpec(drop=1.0))
    assert drop(frame) == b"" and drop.dropped_bytes == len(frame)


def test_hil_with_corruption_freeze_and_cable_pull(fw_binaries):
    faults = FaultSpec.parse("corrupt=0.01,freeze=0.6:0.5,unplug=1.6:0.2,seed=1")
    res = run_hil(HilConfig(episodes=1, max_steps=100, faults=faults,
                            firmware=FirmwareConfig(watchdog_ms=100))).as_dict()
    inj = res["injected"]
    assert res["episodes"] == 1 and res["steps"] >= 1
    assert res["corrupted_executed"] == 0
    assert res["fw_bad_frames"] == inj["corrupted_frames"] > 0
    assert res["watchdog_trips"] >= 2  # the freeze and the cable pull
    assert len(res["safe_entry_ms"]) == 1 and 100.0 < res["safe_entry_ms"][0] < 300.0
    assert res["reconnects"] >= 1
    assert res["estop_ok"] is True and all(res["estop_checks"].values())
    assert res["cmd_rtt_p50_us"] > 0 and res["rtt_samples"] > 20


def _children() -> set[int]:
    """This process's live child pids (every thread's ``children`` list)."""
    import os

    out: set[int] = set()
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/children") as f:
            out |= {int(x) for x in f.read().split()}
    return out


def test_hil_without_a_bundle_on_a_task_without_an_lqr_expert_names_it_and_stops_all(
        fw_binaries):
    before = _children()
    with pytest.raises(ValueError, match="task 'ball_balance' has no LQR expert: pass --bundle"):
        run_hil(HilConfig(task="ball_balance", episodes=1, max_steps=2))
    assert _children() <= before  # the firmware started for the run is gone


def test_hil_cli_json_succeeds_with_one_percent_corruption(fw_binaries, capsys):
    rc = main(["hil", "--episodes", "1", "--faults", "corrupt=0.01,seed=2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    for key in ("success", "episodes", "cmd_rtt_p50_us", "cmd_rtt_p99_us", "bad_frames",
                "lost_frames", "watchdog_trips", "estop_ok"):
        assert key in out
    assert out["success"] == 1.0 and out["estop_ok"] is True
    assert out["corrupted_executed"] == 0
    assert out["fw_bad_frames"] == out["injected"]["corrupted_frames"] > 0


def test_hil_cli_rejects_bad_faults(capsys):
    assert main(["hil", "--faults", "corrupt=abc"]) == 1
    assert "corrupt=abc" in capsys.readouterr().err


def test_hil_cli_rejects_a_negative_planner_latency(capsys):
    assert main(["hil", "--planner-latency-ms", "-5"]) == 1
    assert "--planner-latency-ms must be in 0..10000" in capsys.readouterr().err


def test_hil_drives_the_plant_with_a_bundle_through_the_edit_loop(fw_binaries, tmp_path):
    from tests.helpers.bundles import write_mlp_bundle
    bundle = write_mlp_bundle(tmp_path / "b", hidden=(8,), obs_dim=4, action_dim=1,
                              control_hz=50.0, horizon=10, period_s=0.1, residual_bound=0.05)
    res = run_hil(HilConfig(bundle=bundle, task="cartpole", max_steps=40, check_estop=False,
                            faults=FaultSpec.parse("corrupt=0.01,seed=3"))).as_dict()
    assert res["controller"] == str(bundle) and res["estop_ok"] is None
    assert res["steps"] >= 1 and res["setpoints_applied"] >= 10  # EditLoop ticks reached it
    assert res["corrupted_executed"] == 0
    assert res["fw_bad_frames"] == res["injected"]["corrupted_frames"]


def test_hil_writes_the_measured_planner_latency_for_training(fw_binaries, tmp_path, capsys):
    from edgerl.runtime.planners.latency_record import load_latency_file
    from tests.helpers.bundles import write_mlp_bundle
    bundle = write_mlp_bundle(tmp_path / "b", hidden=(8,), obs_dim=4, action_dim=1,
                              control_hz=50.0, horizon=10, period_s=0.1, residual_bound=0.05)
    path = tmp_path / "hil_latency.json"
    rc = main(["hil", "--bundle", str(bundle), "--task", "cartpole", "--max-steps", "60",
               "--no-estop-check", "--planner-latency-ms", "50", "--json",
               "--write-latency-model", str(path)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    measured = load_latency_file(path)
    assert measured.control_hz == 50.0 and measured.source == "hil"
    assert measured.samples >= 5 and measured.p50_ms >= 50.0  # the emulated 50 ms planner
    assert measured.latency.planner_delay_steps >= 3  # ceil(>= 50 ms / 20 ms)
    assert out["latency_model"]["p50_ms"] == measured.p50_ms
    assert main(["hil", "--write-latency-model", str(path)]) == 1
    assert "needs --bundle" in capsys.readouterr().err


def test_hil_rt_priority_reports_the_link_floor_beside_the_loop_round_trip(fw_binaries):
    try:
        res = run_hil(HilConfig(max_steps=40, check_estop=False, rt_priority=10,
                                link_probe=200)).as_dict()
    except OSError as exc:  # no root / CAP_SYS_NICE here
        pytest.skip(str(exc))
    assert res["rt_priority"] == 10 and res["target"] == "host"
    assert res["link_rtt_samples"] == 200
    assert 0 < res["link_rtt_p50_us"] <= res["link_rtt_p99_us"]
    assert res["rtt_p99_vs_link"] == pytest.approx(res["cmd_rtt_p99_us"]
                                                   / res["link_rtt_p99_us"], rel=1e-2)
    # the probe's setpoints are not counted as the episodes' round trips
    assert res["rtt_samples"] == res["setpoints_sent"] <= 40
    import os
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # restored after the run


def test_hil_cli_rejects_a_bad_rt_priority_and_target(capsys):
    assert main(["hil", "--rt-priority", "100"]) == 1
    assert "--rt-priority must be in 0..99" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown firmware target 'avr'"):
        run_hil(HilConfig(target="avr"))


def test_estop_self_test_waits_for_a_cable_still_out(fw_binaries, capsys):
    """A regression: the episodes end at 1.2 s while the cable pulled at
    1.0 s is out until 3.0 s; the e-stop self-test ran on the dead link, reported
    ``estop_ok: false`` and exited 1 although the e-stop works. Now the harness waits for
    the link, and each unplug reports its safe entry and link-down time."""
    rc = main(["hil", "--episodes", "1", "--max-steps", "60", "--faults", "unplug=1.0:2.0",
               "--link-probe", "0", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    assert out["estop_ok"] is True and all(out["estop_checks"].values())
    assert out["estop_skipped"] is None and out["link_up_at_end"] is True
    [u] = out["unplugs"]
    assert u["hold_s"] == 2.0 and 2000.0 <= u["link_down_ms"] < 4000.0
    # firmware clock: last ACTIVE output -> first SAFE output; the watchdog is 100 ms and
    # the firmware writes an output per plant step (20 ms)
    assert 80.0 <= u["safe_entry_ms"] <= 400.0, u
    assert 0.0 < u["safe_entry_host_ms"] <= 1000.0, u


def test_estop_self_test_reports_link_down_as_its_own_outcome(fw_binaries):
    """A cable that does not come back within ``link_wait_s``: ``estop_ok`` is None with
    ``estop_skipped: "link down"``, never a false e-stop failure."""
    faults = FaultSpec.parse("unplug=0.2:8.0")
    res = run_hil(HilConfig(episodes=1, max_steps=20, faults=faults, link_probe=0,
                            link_wait_s=0.5)).as_dict()
    assert res["estop_ok"] is None and res["estop_skipped"] == "link down"
    assert res["link_up_at_end"] is False and res["estop_checks"] == {}
    [u] = res["unplugs"]
    assert u["link_down_ms"] is None and u["safe_entry_ms"] is not None


def test_fast_loop_unplug_reports_the_firmware_safe_entry(tmp_path):
    """A cable pull in the fast loop: the firmware drives the actuators in FAST_LOOP, not
    ACTIVE, and its watchdog still ends in SAFE; the pull's ``safe_entry_ms`` is timed on
    the firmware's clock from its last driving output before the pull, as in the host loop
    (it was reported as null)."""
    from tests.helpers.bundles import write_mlp_bundle

    # replanned every tick, edits bounded to 0.02: the LQR-hold chunks keep the pole up
    # through the pull, so the episode outlives the watchdog
    bundle = write_mlp_bundle(tmp_path / "steady", obs_dim=4, action_dim=1, hidden=(16, 16),
                              control_hz=50.0, horizon=10, period_s=0.02,
                              residual_bound=0.02, seed=2)
    res = run_hil(HilConfig(bundle=bundle, task="cartpole", mode="fast-loop", episodes=1,
                            max_steps=30, link_probe=0, check_estop=False,
                            faults=FaultSpec.parse("unplug=0.1:0.3,seed=0"))).as_dict()
    assert res["mode"] == "fast-loop" and res["watchdog_trips"] >= 1, res
    [u] = res["unplugs"]
    assert u["hold_s"] == 0.3 and u["link_down_ms"] is not None, u
    # firmware clock: last FAST_LOOP output -> first SAFE output; the watchdog is 100 ms and
    # the firmware writes an output per plant step (20 ms)
    assert u["safe_entry_ms"] is not None and 80.0 <= u["safe_entry_ms"] <= 400.0, u
    assert 0.0 < u["safe_entry_host_ms"] <= 1000.0, u
