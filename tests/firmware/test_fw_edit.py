"""The on-MCU fast loop: the exported edit policy header, ``src/edit.c`` against the Python /
onnxruntime path (host build and the emulated Cortex-M4F), and FAST_LOOP on a live link
(CHUNK in, EDIT_TICK out, watchdog) on the host build and in QEMU, and ``edgerl hil --mode
fast-loop``. Timing bounds use the firmware's own clock (EDIT_TICK.fw_time_us, STATUS)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from edgerl.bench.hil.edit_step import edit_parity
from edgerl.contract.spec import load_bundle_manifest
from edgerl.contract.wire import NO_ROW, Mode
from edgerl.export.edit_header import EditHeaderError, write_edit_header
from edgerl.hil.fast_loop import FastLoopController, fast_loop_firmware
from edgerl.hil.firmware import FirmwareConfig
from edgerl.runtime.serial_transport import SerialConfig, SerialTransport
from tests.helpers.qemu import require_qemu

pytestmark = pytest.mark.hil

from tests.helpers.bundles import write_mlp_bundle  # noqa: E402


def _split_bundle(path: Path, intent_dim: int = 0) -> Path:
    """An edit bundle that exercises every builder option: fast subset of a 6-element
    observation, normalisation outside the graph, 2 actions with rate limits, lookahead 3,
    one committed action (and, with ``intent_dim``, the planner's intent)."""
    b = write_mlp_bundle(path, obs_dim=6, action_dim=2, hidden=(24, 24), control_hz=100.0,
                         horizon=12, lookahead=3, n_committed=1, obs_indices=[0, 2, 5],
                         max_rate=[20.0, 30.0], seed=4, intent_dim=intent_dim)
    m = json.loads((b / "manifest.json").read_text())
    m["observation"]["normalized_in_graph"] = False
    m["observation"]["mean"] = [0.1, -0.2, 0.3, 0.0, 0.5, -0.4]
    m["observation"]["std"] = [1.5, 0.5, 2.0, 1.0, 0.8, 1.2]
    (b / "manifest.json").write_text(json.dumps(m))
    return b


@pytest.fixture
def cart_bundle(tmp_path) -> Path:
    """A cartpole-shaped edit bundle (obs 4, action 1, 50 Hz, chunk 10 x 20 ms)."""
    return write_mlp_bundle(tmp_path / "cart", obs_dim=4, action_dim=1, hidden=(32, 32),
                            control_hz=50.0, horizon=10, period_s=0.1, seed=2)


def test_edit_header_refuses_what_the_fast_loop_cannot_run(tmp_path):
    planner_only = write_mlp_bundle(tmp_path / "p", method="planner", raw_obs_input=True)
    with pytest.raises(EditHeaderError, match="edit bundles"):
        write_edit_header(planner_only, tmp_path / "h1")
    long_chunk = write_mlp_bundle(tmp_path / "l", action_dim=8, horizon=10)
    with pytest.raises(EditHeaderError, match="exceeds one CHUNK message"):
        write_edit_header(long_chunk, tmp_path / "h2")
    info = write_edit_header(_split_bundle(tmp_path / "s"), tmp_path / "h3")
    text = info.path.read_text()
    assert "#define EDGERL_EDIT_DIM 15\n" in text  # 3 + 4 * 2 + 1 + 1 * 2 + 1
    assert "edgerl_edit_fast_idx[3] = {0, 2, 5};" in text
    assert "#define EDGERL_EDIT_NORMALIZE 1" in text
    assert "#define EDGERL_EDIT_PERIOD_US 10000u" in text
    assert (info.net.in_dim, info.net.out_dim) == (15, 2)
    assert "#define EDGERL_EDIT_INTENT_DIM 0\n" in text
    info = write_edit_header(_split_bundle(tmp_path / "i", intent_dim=3), tmp_path / "h4")
    text = info.path.read_text()
    assert "#define EDGERL_EDIT_INTENT_DIM 3\n" in text and info.intent_dim == 3
    assert "#define EDGERL_EDIT_DIM 18\n" in text  # 15 + the intent


@pytest.mark.parametrize("make", ["split", "cart", "intent"])
def test_edit_step_host_build_matches_python_and_onnxruntime(tmp_path, make, cart_bundle):
    bundle = {"split": lambda: _split_bundle(tmp_path / "s"), "cart": lambda: cart_bundle,
              "intent": lambda: _split_bundle(tmp_path / "i", intent_dim=3)}[make]()
    rep = edit_parity(bundle, n=1000, seed=1)
    assert rep["rows_equal"], rep
    assert 50 < rep["no_row_ticks"] < 600  # no chunk, before t0, stale: all exercised
    assert rep["max_abs_err_edit_obs"] <= 1e-6, rep
    assert rep["max_abs_err_cmd"] <= 1e-5, rep
    if make == "intent":  # the intent segment: read, zeros without a chunk or an intent,
        # and a chunk with an intent of another size refused on both sides
        assert rep["edit_dim"] == 18 and rep["intent_ticks"] > 300, rep
        assert rep["max_abs_err_intent"] == 0.0 and rep["refused_intent_ticks"] > 10, rep


def test_edit_step_on_the_m4_matches_python_and_counts_instructions(tmp_path):
    require_qemu()
    rep = edit_parity(_split_bundle(tmp_path / "s"), n=1000, m4=True, seed=2)
    assert rep["target"] == "qemu-m4" and rep["rows_equal"], rep
    assert rep["max_abs_err_edit_obs"] <= 1e-6 and rep["max_abs_err_cmd"] <= 1e-5, rep
    # -icount shift=0 counts instructions: deterministic, and at least the 16-24-24-2 MLP's
    # 1,008 multiply-adds
    assert 1000 < rep["instructions_p50"] <= rep["instructions_max"] < 100_000, rep


def _fifo_allowed() -> bool:
    """SCHED_FIFO is permitted here (root or CAP_SYS_NICE)."""
    from edgerl.hil.rt import realtime

    with realtime(1) as state:
        return state.granted


def _edit_ticks(t: SerialTransport) -> list:
    ticks: list = []
    t.on_message = lambda msg, now: ticks.append(msg) if msg.name == "EDIT_TICK" else None
    return ticks


@pytest.mark.parametrize("target", ["host", "qemu-m4"])
def test_fast_loop_runs_chunks_at_the_firmware_rate_and_trips_the_watchdog(cart_bundle,
                                                                          target):
    if target == "qemu-m4":
        require_qemu()
    spec = load_bundle_manifest(cart_bundle)
    period_us, horizon = round(1e6 / spec.control_hz), spec.chunk.horizon
    wd_ms = 150
    fw = fast_loop_firmware(cart_bundle, FirmwareConfig(n_cmd=1, watchdog_ms=wd_ms), target)
    with fw, SerialTransport(SerialConfig(fw.port)) as t:
        t.connect()
        ticks = _edit_ticks(t)
        t.set_mode(Mode.FAST_LOOP)  # refused: no plant state has reached the firmware yet
        assert t.request_status(timeout_s=2.0)["setpoints_rejected"] == 1
        for _ in range(200):  # the STATE echo shows the plant state arrived
            fw.send_sensor([0.1, -0.2, 0.05, 0.0], 0.0)
            time.sleep(0.01)
            if (s := t.latest_state()) is not None and s.state.shape[0] == 4:
                break
        assert t.set_mode(Mode.FAST_LOOP)
        assert t.request_status(timeout_s=2.0)["mode"] == Mode.FAST_LOOP
        rows = np.linspace(-0.5, 0.5, horizon, dtype=np.float32)[:, None]
        now = time.perf_counter()
        assert t.send_chunk(rows, now, spec.chunk.dt_s, now, step0=7)
        # an older chunk (step0 6), even with a later t0, is refused
        assert t.send_chunk(rows + 0.4, now + 0.01, spec.chunk.dt_s, now, step0=6)
        end = time.perf_counter() + 0.6  # 30 ticks, keeping the plant state fresh
        while time.perf_counter() < end:
            fw.send_sensor([0.1, -0.2, 0.05, 0.0], 0.0)
            t.heartbeat()
            time.sleep(0.02)
        # the host goes silent (the plant does not): the watchdog ends the fast loop in SAFE
        end = time.perf_counter() + 2.0
        while time.perf_counter() < end and fw.actuator.mode != Mode.SAFE:
            fw.send_sensor([0.1, -0.2, 0.05, 0.0], 0.0)
            time.sleep(0.02)
        status = t.request_status(timeout_s=2.0)
    assert fw.actuator.mode == Mode.SAFE and status["watchdog_trips"] == 1
    # firmware clock; the margin absorbs a loaded 2-core machine descheduling the firmware
    # process (as test_fw_device.py; test_fw_qemu.py holds the 1 ms bound at SCHED_FIFO)
    assert wd_ms * 1000 < status["safe_entry_us"] < wd_ms * 1000 + 60_000
    got = [m.fields for m in ticks]
    assert len(got) >= 20
    assert [g["tick"] for g in got] == list(range(1, len(got) + 1))  # none lost, in order
    gaps = np.diff([g["fw_time_us"] for g in got])
    assert abs(np.median(gaps) - period_us) <= 1000, gaps  # the firmware's own rate
    used = [g for g in got if g["has_chunk"]]
    assert used and all(g["chunk_step0"] == 7 for g in used)
    assert got[-1]["chunks_rx"] == 1 and got[-1]["chunks_rejected"] == 1
    # chunk dt == tick period: consecutive ticks walk the rows, then hold the last one
    # until the chunk goes stale (H + stale_steps), after which has_chunk is 0
    r = [g["row"] for g in used]
    assert all(b >= a for a, b in zip(r, r[1:])) and r[-1] == horizon - 1
    assert np.median(np.diff(r[:horizon // 2])) == 1
    stale = [g for g in got if not g["has_chunk"]]
    assert stale and all(g["row"] == NO_ROW for g in stale)
    assert all(abs(g["cmd"][0]) <= 1.0 for g in got)  # action limits


def test_fast_loop_takes_chunks_with_the_planner_intent(tmp_path):
    """Host build of an intent bundle: a CHUNK whose intent has the bundle's size (or none)
    is taken, one of another size is refused and counted."""
    bundle = write_mlp_bundle(tmp_path / "intent", obs_dim=4, action_dim=1, hidden=(8,),
                              control_hz=50.0, horizon=10, period_s=0.1, intent_dim=2)
    fw = fast_loop_firmware(bundle, FirmwareConfig(n_cmd=1, watchdog_ms=500), "host")
    with fw, SerialTransport(SerialConfig(fw.port)) as t:
        t.connect()
        ticks = _edit_ticks(t)
        for _ in range(200):
            fw.send_sensor([0.1, -0.2, 0.05, 0.0], 0.0)
            time.sleep(0.01)
            if (s := t.latest_state()) is not None and s.state.shape[0] == 4:
                break
        assert t.set_mode(Mode.FAST_LOOP)
        rows = np.zeros((10, 1), np.float32)
        now = time.perf_counter()
        assert t.send_chunk(rows, now, 0.02, now, step0=1, intent=np.array([0.5, -0.5]))
        assert t.send_chunk(rows, now, 0.02, now, step0=2)  # no intent: zeros
        assert t.send_chunk(rows, now, 0.02, now, step0=3, intent=np.array([0.1, 0.2, 0.3]))
        end = time.perf_counter() + 2.0
        while time.perf_counter() < end and not (ticks and ticks[-1].fields["chunks_rx"] == 2
                                                 and ticks[-1].fields["chunks_rejected"] == 1):
            fw.send_sensor([0.1, -0.2, 0.05, 0.0], 0.0)
            time.sleep(0.02)
    last = ticks[-1].fields
    assert (last["chunks_rx"], last["chunks_rejected"]) == (2, 1), last


def test_fast_loop_refused_by_firmware_without_an_edit_policy(link):
    fw, t = link(n_cmd=1)
    t.set_mode(Mode.FAST_LOOP)
    status = t.request_status(timeout_s=1.0)
    assert status["mode"] != Mode.FAST_LOOP and status["setpoints_rejected"] == 1
    assert t.send_chunk(np.zeros((4, 1), np.float32), 0.0, 0.02, 0.0)
    assert t.request_status(timeout_s=1.0)["setpoints_rejected"] == 2
    with pytest.raises(ValueError, match="does not fit a CHUNK"):
        t.send_chunk(np.zeros((51, 1), np.float32), 0.0, 0.02, 0.0)
    with pytest.raises(ValueError, match="intent of shape"):
        t.send_chunk(np.zeros((4, 1), np.float32), 0.0, 0.02, 0.0, intent=np.zeros(9))


@pytest.mark.slow
@pytest.mark.parametrize("target", ["host", "qemu-m4"])
def test_edgerl_hil_fast_loop_mode(cart_bundle, target, capsys):
    from edgerl.apps.cli import main

    if target == "qemu-m4":
        require_qemu()
    rt = _fifo_allowed()  # as test_fw_qemu.py: keeps the host's load off the firmware clock
    rc = main(["hil", "--bundle", str(cart_bundle), "--task", "cartpole", "--mode",
               "fast-loop", "--target", target, "--max-steps", "60", "--link-probe", "20",
               "--rt-priority", "10" if rt else "0", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["mode"] == "fast-loop" and out["estop_ok"] is True
    assert out["rt_granted"] is rt
    # the telemetry's count lags (the last chunks may arrive after the last EDIT_TICK the
    # summary saw, or while a loaded machine let the firmware fall to SAFE until the resume)
    assert out["chunks_sent"] >= 3 and out["fw_chunks_rx"] >= out["chunks_sent"] // 2
    # the random policy may drop the pole early: count ticks against the plant's steps
    assert out["steps"] >= 10 and out["edit_ticks"] >= out["steps"] // 2
    # most ticks edit a chunk (not all: the first ones, and a planner late under load)
    assert out["edit_ticks_with_chunk"] >= 0.6 * out["edit_ticks"]
    # firmware clock; without SCHED_FIFO a loaded host deschedules the firmware process and
    # late ticks past a period are skipped (a gap of two periods between counted ticks)
    slack = 1000 if rt else out["edit_period_us"] // 2
    assert abs(out["edit_tick_gap_p50_us"] - out["edit_period_us"]) <= slack
    assert out["setpoints_sent"] == 0  # the host sent no command during the episodes
    assert out["corrupted_executed"] == 0 and out["fw_chunks_rejected"] == 0


@pytest.mark.slow
def test_hil_fast_loop_resumes_after_a_cable_pull(tmp_path):
    from edgerl.hil.faults import FaultSpec
    from edgerl.hil.harness import HilConfig, run_hil

    # replanned every tick, edits bounded to 0.02: the LQR-hold chunks balance the pole
    steady = write_mlp_bundle(tmp_path / "steady", obs_dim=4, action_dim=1, hidden=(16, 16),
                              control_hz=50.0, horizon=10, period_s=0.02,
                              residual_bound=0.02, seed=2)
    res = run_hil(HilConfig(bundle=steady, task="cartpole", mode="fast-loop",
                            max_steps=100, link_probe=0,
                            faults=FaultSpec.parse("unplug=0.5:0.3,seed=0"))).as_dict()
    if res["steps"] < 45:
        pytest.skip(f"the random policy dropped the pole after {res['steps']} steps, before "
                    "the pull ended")
    assert res["reconnects"] >= 1 and res["watchdog_trips"] >= 1  # the pull tripped it
    # the host asked for FAST_LOOP again and the firmware entered it a second time
    assert res["fast_loop_resumes"] >= 1 and res["edit_loop_entries"] >= 2
    assert res["estop_ok"] is True


def test_fast_loop_controller_needs_an_edit_bundle(tmp_path):
    b = write_mlp_bundle(tmp_path / "p", method="planner", raw_obs_input=True)
    with pytest.raises(ValueError, match="needs an edit bundle"):
        FastLoopController(b, SerialTransport(SerialConfig("/dev/null")), 4)
