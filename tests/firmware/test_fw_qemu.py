"""The firmware on an emulated Cortex-M4F (MPS2 AN386 in qemu-system-arm): the linked ELF,
the serial protocol, watchdog, e-stop and faults through ``edgerl hil --target qemu-m4``, and
the exported policy.h on the MCU (parity with onnxruntime, instructions per inference,
fallback when the host link drops). Skips only where QEMU / the cross compiler are absent,
and fails instead when CI=true."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from edgerl.apps.cli import main
from edgerl.contract.wire import Mode
from edgerl.hil.faults import FaultSpec, TxFaults
from edgerl.hil.firmware import FIRMWARE_DIR, FirmwareConfig, FirmwareProcess
from edgerl.hil.link_checks import estop_check
from edgerl.runtime.serial_transport import SerialConfig, SerialTransport
from tests.helpers.qemu import require_qemu

pytestmark = pytest.mark.hil

FLASH_BYTES, RAM_BYTES = 256 * 1024, 64 * 1024  # boards/mps2_an386/mps2_an386.ld


def _exported_policy(tmp_path: Path, seed: int = 5):
    """A 4-16-16-2 tanh MLP as policy.onnx + the exported policy.h, and an onnxruntime
    function ``(N, 4) -> (N, 2)``."""
    c_header = pytest.importorskip("edgerl.export.c_header")
    ort = pytest.importorskip("onnxruntime")
    from tests.helpers.bundles import mlp_onnx, random_mlp
    ws, bs = random_mlp([4, 16, 16, 2], seed=seed)
    onnx_path = tmp_path / "policy.onnx"
    onnx_path.write_bytes(mlp_onnx(ws, bs, activation="Tanh"))
    header = tmp_path / "policy.h"
    c_header.write_c_header(onnx_path, header)
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name

    def reference(obs: np.ndarray) -> np.ndarray:
        return np.concatenate([sess.run(None, {name: o[None]})[0] for o in obs])

    return header, reference


def _trip_bound_us(watchdog_us: int, late_us: int) -> int:
    """The latest a watchdog trip may land on the board's clock [us]: the first 1 ms SysTick
    poll past the period, plus that tick's delivery delay (``safe_entry_late_us``) and 50 us
    of emulated instructions to the poll. A tick a whole period late (1000) says only "1 ms
    or more": without SCHED_FIFO the host may deschedule QEMU for ms, so 10 ms then."""
    return watchdog_us + (1_050 + late_us if late_us < 1_000 else 10_000)


def _rt_allowed() -> bool:
    """SCHED_FIFO is permitted here (root or CAP_SYS_NICE)."""
    import os

    from edgerl.hil.rt import realtime

    try:
        with realtime(1):
            return os.sched_getscheduler(0) == os.SCHED_FIFO
    except OSError:
        return False


def test_qemu_m4_target_links_elfs_with_werror_and_prints_footprint(tmp_path):
    require_qemu()
    res = subprocess.run(["make", "-C", str(FIRMWARE_DIR), f"BUILD={tmp_path}", "qemu-m4"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "-Werror" in res.stdout and "-mcpu=cortex-m4" in res.stdout
    sizes = {}
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 6 and parts[5].endswith(".elf") and parts[0].isdigit():
            sizes[Path(parts[5]).name] = tuple(int(p) for p in parts[:3])
    assert set(sizes) == {"edgerl_fw_m4.elf", "edgerl_fw_m4_policy.elf", "policy_bench_m4.elf",
                          "edgerl_fw_m4_edit.elf", "edit_bench_m4.elf"}
    for name, (text, data, bss) in sizes.items():
        assert 1000 < text + data <= FLASH_BYTES and data + bss <= RAM_BYTES, name
        head = (tmp_path / "m4" / name).read_bytes()[:28]
        assert head[:4] == b"\x7fELF" and head[4] == 1  # ELFCLASS32
        assert int.from_bytes(head[16:18], "little") == 2  # ET_EXEC: linked, not an object
        assert int.from_bytes(head[18:20], "little") == 40  # EM_ARM
        assert int.from_bytes(head[24:28], "little") & 1  # Thumb entry point
    assert sizes["edgerl_fw_m4_policy.elf"][0] > sizes["edgerl_fw_m4.elf"][0]
    assert sizes["edgerl_fw_m4_edit.elf"][0] > sizes["edgerl_fw_m4.elf"][0]


def test_qemu_boot_config_handshake_and_setpoints(start_qemu):
    fw = start_qemu(n_cmd=2, watchdog_ms=70)
    with SerialTransport(SerialConfig(fw.port)) as t:
        # the options reached the firmware through the boot configuration block
        assert (t.hello.n_cmd, t.hello.watchdog_ms, t.hello.has_policy) == (2, 70, False)
        fw.send_sensor([1.0, -2.0, 3.5], 0.0)
        for i in range(100):
            seq = t.send_setpoint([0.01 * i, -1.0])
            s = t.wait_state(seq, 1.0)
            assert s is not None and s.setpoint_seq == seq
        np.testing.assert_array_equal(s.cmd, np.float32([0.99, -1.0]))
        np.testing.assert_array_equal(s.state, np.float32([1.0, -2.0, 3.5]))
        a = fw.wait_actuator(lambda a: a.cmd[0] == np.float32(0.99), 1.0)
        assert a is not None and a.mode == Mode.ACTIVE
        status = t.request_status()
    assert status["setpoints_applied"] == 100 and status["bad_frames"] == 0
    assert t.stats().rtt_samples == 100


@pytest.mark.parametrize("safe", ["zero", "hold"])
def test_qemu_watchdog_safe_within_1ms_of_period_on_the_firmware_clock(start_qemu, safe):
    from edgerl.hil.rt import set_fifo_process

    fw = start_qemu(watchdog_ms=40, safe=safe)
    # QEMU's clock follows the host's: the emulated SysTick arrives when the host delivers
    # QEMU's timer, so a trip can land past the 1 ms poll by that delivery delay. SCHED_FIFO
    # keeps the host's load off it; what is left (one CI trip landed 182 us past the poll at
    # SCHED_FIFO) the firmware measures itself: STATUS.safe_entry_late_us, how late the tick
    # that ran the tripping poll came, is the limit measured in the same run
    try:
        set_fifo_process(fw.proc.pid, 10)
        rt = True
    except OSError:  # no root / CAP_SYS_NICE: the firmware's own measure still applies
        rt = False
    entries, late = [], []
    with SerialTransport(SerialConfig(fw.port)) as t:
        for trial in range(5):  # a poll every 2 ms passes 5 trials 1 time in ~30
            seq = t.send_setpoint([0.75])
            assert t.wait_state(seq, 1.0) is not None
            t_last = t.sent_times()[seq]
            a = fw.wait_actuator(lambda a, t0=t_last: a.mode == Mode.SAFE and a.t_host > t0,
                                 2.0)
            assert a is not None
            np.testing.assert_array_equal(a.cmd, np.float32([0.0 if safe == "zero" else 0.75]))
            status = t.request_status()
            assert status["watchdog_trips"] == trial + 1
            entries.append(status["safe_entry_us"])
            late.append(status["safe_entry_late_us"])
    # SysTick polls the watchdog every 1 ms of the emulated board's clock. The poll before
    # the trip saw at most the period, so the trip lands within 1 ms plus its own tick's
    # delivery delay past it (50 us for the emulated instructions between the tick's
    # handler and the poll)
    assert all(40_000 < e <= _trip_bound_us(40_000, lt) for e, lt in zip(entries, late)), \
        (entries, late)
    # a tick a whole period late (1000: the firmware cannot say how late) would hide a
    # missed poll: at SCHED_FIFO none is (44-250 us here)
    assert max(late) < 1_000 or not rt, late


def test_qemu_one_percent_corruption_every_bad_frame_counted_none_executed(start_qemu):
    fw = start_qemu(watchdog_ms=1000)
    faults = TxFaults(FaultSpec(corrupt=0.01, seed=3))
    with SerialTransport(SerialConfig(fw.port)) as t:
        t.tx_filter = faults
        sent = []
        for i in range(300):
            seq = t.send_setpoint([i * 1e-3])
            sent.append(seq)
            t.wait_state(seq, 0.05)  # paced: the emulated UART takes a byte at a time
        t.tx_filter = None
        status = t.request_status()
        acked = t.acked_setpoints()
    assert faults.corrupted_frames > 30
    assert status["bad_frames"] == faults.corrupted_frames
    assert not acked & faults.corrupted_setpoints
    assert status["setpoints_applied"] == len(sent) - len(faults.corrupted_setpoints)


def test_qemu_estop_latches_across_cable_pull_until_cleared(start_qemu):
    fw = start_qemu()
    with SerialTransport(SerialConfig(fw.port)) as t:
        res = estop_check(fw, t, 1)
        status = t.request_status()
    assert res == dict.fromkeys(res, True) and len(res) == 5
    assert status["estops"] == 1 and status["mode"] == Mode.ACTIVE


def test_hil_cli_qemu_m4_without_faults(capsys):
    require_qemu()
    rc = main(["hil", "--target", "qemu-m4", "--max-steps", "60", "--no-estop-check",
               "--link-probe", "50",
               "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["target"] == "qemu-m4"
    # closed loop through the emulated board: every setpoint sent was applied and echoed
    # (whether the LQR keeps the pole up depends on the host's load, not on the firmware)
    assert out["steps"] >= 20 and out["setpoints_applied"] == out["setpoints_sent"] >= 15
    assert out["rtt_samples"] == out["setpoints_sent"] and out["cmd_rtt_p50_us"] > 0
    assert out["bad_frames"] == 0 and out["watchdog_trips"] == 0


def test_hil_cli_qemu_m4_with_corruption_and_cable_pull(capsys):
    require_qemu()
    rt = _rt_allowed()  # see the watchdog test: keeps host load off the emulated clock
    rc = main(["hil", "--target", "qemu-m4", "--max-steps", "100", "--json", "--link-probe", "50",
               "--faults", "corrupt=0.01,unplug=0.8:0.2,seed=1",
               "--rt-priority", "10" if rt else "0"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0, out
    assert out["corrupted_executed"] == 0
    assert out["fw_bad_frames"] == out["injected"]["corrupted_frames"] > 0
    assert out["reconnects"] >= 1 and out["watchdog_trips"] >= 1
    # the cable pull tripped the watchdog on the firmware's own clock within 1 ms of its
    # period, plus the SysTick delivery delay the firmware measured in the same run
    late = out["fw_safe_entry_late_us"]
    assert 100_000 < out["fw_safe_entry_us"] <= _trip_bound_us(100_000, late), \
        (out["fw_safe_entry_us"], late)
    assert late < 1_000 or not rt, late
    assert out["estop_ok"] is True


def test_exported_policy_h_on_the_m4_matches_onnxruntime_on_1000_observations(tmp_path):
    require_qemu()
    from edgerl.hil.qemu import policy_bench_elf, run_policy_bench

    header, reference = _exported_policy(tmp_path)
    obs = np.random.default_rng(0).uniform(-2.0, 2.0, (1000, 4)).astype(np.float32)
    res = run_policy_bench(policy_bench_elf(header, tmp_path), obs, out_dim=2)
    err = float(np.abs(res.actions - reference(obs)).max())
    assert res.actions.shape == (1000, 2) and err <= 1e-5, err
    # 4*16 + 16*16 + 16*2 = 352 multiply-adds and 32 tanhf: thousands of instructions
    assert 1_000 < float(res.instructions.mean()) < 50_000


@pytest.mark.parametrize("target", ["host", "qemu-m4"])
def test_fallback_policy_holds_the_plant_when_the_link_drops(tmp_path, fw_binaries, target):
    header, reference = _exported_policy(tmp_path, seed=11)
    cfg = FirmwareConfig(n_cmd=2, watchdog_ms=50, policy=True, fallback="policy")
    if target == "host":
        build = tmp_path / "build"
        res = subprocess.run(["make", "-s", "-C", str(FIRMWARE_DIR), f"BUILD={build}",
                              f"POLICY_H={header}", f"{build}/edgerl_fw_host_policy"],
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        fw = FirmwareProcess(cfg, binary=build / "edgerl_fw_host_policy")
    else:
        require_qemu()
        from edgerl.hil.qemu import QemuFirmwareProcess, qemu_elf

        fw = QemuFirmwareProcess(cfg, elf=qemu_elf(True, policy_h=header,
                                                   build_dir=tmp_path / "m4"))
    obs = np.float32([[0.2, -0.4, 0.1, 0.3], [-0.5, 0.25, 0.6, -0.1]])
    expected = reference(obs)

    def feed(state: np.ndarray, pred, timeout_s: float = 2.0):
        """The plant's sensor stream at 100 Hz until ``pred(actuator output)`` holds."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            fw.send_sensor(state, 0.0)
            a = fw.wait_actuator(pred, 0.01)
            if a is not None:
                return a
        return None

    with fw, SerialTransport(SerialConfig(fw.port)) as t:
        assert t.hello.has_policy
        fw.send_sensor(obs[0], 0.0)
        seq = t.send_setpoint([0.5, 0.5])
        assert t.wait_state(seq, 1.0) is not None
        t.unplug()  # the host link drops: no more setpoints or heartbeats
        a = feed(obs[0], lambda a: a.mode == Mode.LOCAL_POLICY)
        assert a is not None and np.abs(a.cmd - expected[0]).max() <= 1e-5, (a, expected)
        # the policy keeps acting on each fresh plant state, at the firmware's rate
        a = feed(obs[1], lambda a: np.abs(a.cmd - expected[1]).max() <= 1e-5)
        assert a is not None and a.mode == Mode.LOCAL_POLICY
        t.replug()
        status = t.request_status()
        assert status["mode"] == Mode.LOCAL_POLICY and status["watchdog_trips"] == 1
        seq = t.send_setpoint([0.25, -0.25])  # the host takes over again
        a = fw.wait_actuator(lambda a: a.mode == Mode.ACTIVE, 1.0)
        assert a is not None and np.allclose(a.cmd, [0.25, -0.25])
        # a watchdog trip without a fresh plant state falls back to the safe state instead
        t.unplug()
        a = fw.wait_actuator(lambda a: a.mode == Mode.SAFE, 2.0)
        assert a is not None and np.all(a.cmd == 0.0)
