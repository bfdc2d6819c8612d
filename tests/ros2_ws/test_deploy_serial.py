"""`edgerl deploy --robot serial`: serial_bridge_node + planner + edit policy as separate
processes over real rclpy, against the compiled host firmware on a pty (fed a plant state
through its sensor HAL); no node process may load torch.

Needs no torch itself (the bundle is the runtime tests' MLP bundle with 4 observations and
1 action, as the firmware is configured), so the Python 3.10 runtime-only CI job runs it too
(tools/ci_runtime_py310.sh)."""

from __future__ import annotations

import json
import sys
import threading

import pytest

from edgerl.apps.cli import main
from tests.helpers.bundles import write_mlp_bundle

pytestmark = [pytest.mark.ros, pytest.mark.hil]


@pytest.fixture
def fed_firmware():
    """The host firmware on a pty with a plant state fed at 100 Hz; stopped at teardown."""
    from edgerl.hil.firmware import FirmwareConfig, FirmwareError, FirmwareProcess

    try:
        fw = FirmwareProcess(FirmwareConfig(n_cmd=1, watchdog_ms=300)).start()
    except (FirmwareError, OSError) as exc:
        pytest.skip(f"host firmware unavailable: {exc}")
    stop = threading.Event()

    def feed():
        t = 0.0
        while not stop.is_set() and fw.alive:
            fw.send_sensor([0.0, 0.0, 0.02, 0.0], t)
            t += 0.01
            stop.wait(0.01)

    feeder = threading.Thread(target=feed, name="plant-feed", daemon=True)
    feeder.start()
    try:
        yield fw
    finally:
        stop.set()
        feeder.join(5)
        fw.stop()


def test_deploy_serial_graph_drives_the_firmware_without_torch(fed_firmware, tmp_path,
                                                                ros_domain, capsys):
    from edgerl.contract.wire import Mode

    bundle = write_mlp_bundle(tmp_path / "bundle", obs_dim=4, action_dim=1, control_hz=50.0,
                              horizon=10, period_s=0.05, planner=True, hidden=(16,))
    rc = main(["deploy", "--bundle", str(bundle), "--robot", "serial",
               "--port", fed_firmware.port, "--baud", "115200", "--device", "auto",
               "--duration", "3", "--json",
               "--domain-id", str(ros_domain)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    assert out["success"] is True and out["robot_kind"] == "serial"
    # the three node processes ran without torch (torch_mapped: checked below on live
    # processes with and without torch)
    assert out["torch_loaded"] == {"serial_bridge_node": False, "planner_node": False,
                                   "edit_policy_node": False}
    # --device auto reached the edit node (no GPU provider here: onnxruntime on CPU)
    import onnxruntime as ort

    if "TensorrtExecutionProvider" not in ort.get_available_providers():
        assert out["edit_inference"] == "onnxruntime:CPUExecutionProvider"
    assert out["diagnostics_sources"] == ["edgerl: edit_policy_node", "edgerl: planner_node",
                                          "edgerl: serial_bridge_node"]
    # commands at the manifest's 50 Hz, applied by the firmware (acked setpoints, actuator)
    assert abs(out["cmd_rate_hz"] - 50.0) / 50.0 < 0.1, out["cmd_rate_hz"]
    assert out["serial_setpoints_acked"] >= 0.8 * 50 * 2
    assert 0 < out["serial_rtt_p50_us"] <= out["serial_rtt_p99_us"]
    # the firmware ran in ACTIVE mode on those setpoints (it falls back to SAFE, by its
    # watchdog, once the graph has stopped)
    active = [smp for smp in fed_firmware.history if smp.mode == Mode.ACTIVE]
    assert len(active) >= 50, [smp.mode for smp in fed_firmware.history[-5:]]


def test_deploy_serial_composed_sends_each_setpoint_from_the_reader_thread(
        fed_firmware, tmp_path, ros_domain, capsys):
    """--compose: the serial bridge and the edit node in one process; each firmware state
    ticks the edit node in the bridge's reader thread and its command goes out as a SETPOINT
    by call (e2e: state stamp -> setpoint sent), still without torch."""
    bundle = write_mlp_bundle(tmp_path / "bundle", obs_dim=4, action_dim=1, control_hz=50.0,
                              horizon=10, period_s=0.05, planner=True, hidden=(16,))
    rc = main(["deploy", "--bundle", str(bundle), "--robot", "serial", "--compose",
               "--trigger", "state", "--port", fed_firmware.port, "--baud", "115200",
               "--duration", "3", "--json", "--domain-id", str(ros_domain)])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    assert out["torch_loaded"] == {"serial_edit_container": False, "planner_node": False}
    assert out["edit_trigger"] == "state" and out["edit_inline_tick"] is True
    assert out["diagnostics_sources"] == ["edgerl: edit_policy_node", "edgerl: planner_node",
                                          "edgerl: serial_bridge_node"]
    assert out["serial_setpoints_acked"] >= 50
    # the state's stamp is the firmware's sensor sample time (its reported sensor age, up to
    # the 10 ms feed period here, is part of it): sample -> setpoint written
    assert 0 < out["e2e_latency_p50_us"] < 15_000, out["e2e_latency_p50_us"]
    assert out["edit_state_age_at_tick_p50_ms"] < 15


def test_deploy_serial_needs_a_port(tmp_path, capsys):
    rc = main(["deploy", "--bundle", str(tmp_path), "--robot", "serial"])
    assert rc != 0
    assert "--robot serial needs --port" in capsys.readouterr().err


@pytest.mark.parametrize("imports", ["numpy", "torch"])
def test_torch_mapped_sees_torch_in_a_live_process(imports):
    """The check the graph test relies on: false for a numpy-only process, true once torch
    is imported (where torch is installed)."""
    import importlib.util
    import subprocess

    from edgerl_ros.graph import torch_mapped

    if importlib.util.find_spec(imports) is None:
        pytest.skip(f"{imports} not installed")
    proc = subprocess.Popen([sys.executable, "-c", f"import sys, {imports}; print('ready', "
                             "flush=True); sys.stdin.read()"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        assert torch_mapped(proc.pid) is (imports == "torch")
    finally:
        proc.stdin.close()
        proc.wait(30)
