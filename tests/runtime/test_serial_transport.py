"""SerialTransport on real ptys: handshake timeouts, the CommandSink, the EditLoop (the port
under it: test_serial_port.py)."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from edgerl.contract.wire import FrameParser, codec
from edgerl.hil.firmware import FirmwareConfig, FirmwareProcess, firmware_binary
from edgerl.runtime.serial_transport import (
    SerialCommandSink,
    SerialConfig,
    SerialTransport,
    TransportTimeout,
)


@pytest.fixture(scope="module")
def fw_built():
    try:
        firmware_binary()
    except Exception as exc:
        pytest.skip(f"firmware not buildable: {exc}")


def _reader_threads() -> int:
    return sum(t.name == "serial-reader" for t in threading.enumerate())


def test_silent_device_times_out_and_cleans_up():
    master, slave = os.openpty()
    try:
        before = _reader_threads()
        t = SerialTransport(SerialConfig(os.ttyname(slave), hello_timeout_s=0.05,
                                         hello_attempts=2))
        with pytest.raises(TransportTimeout, match="no HELLO_ACK .* after 2 attempts"):
            t.connect()
        assert _reader_threads() == before and not t.connected
        # what reached the "device": a flush delimiter and a HELLO per attempt
        data = os.read(master, 4096)
        msgs = [codec.decode(f) for f in FrameParser().feed(data)]
        assert [m.name for m in msgs] == ["HELLO", "HELLO"]
        assert [m.seq for m in msgs] == [0, 1]
    finally:
        os.close(master)
        os.close(slave)


@pytest.mark.hil
def test_sink_reports_down_after_the_firmware_dies(fw_built):
    fw = FirmwareProcess(FirmwareConfig()).start()
    t = SerialTransport(SerialConfig(fw.port, reconnect_backoff_s=(0.01, 0.05)))
    sink = SerialCommandSink(t)
    try:
        t.connect()
        assert sink(np.float32([0.2]), 0.0) is True
        fw.stop()  # the device disappears
        deadline = time.monotonic() + 2.0
        while t.connected and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not t.connected and t.stats().link_failures == 1
        assert sink(np.float32([0.2]), 0.0) is False
    finally:
        t.close()
        fw.stop()
    assert _reader_threads() == 0


@pytest.mark.hil
def test_edit_loop_drives_the_firmware_through_the_sink(fw_built, mlp_bundle):
    from edgerl.runtime.bundle import load_bundle
    from edgerl.runtime.chunk_buffer import ChunkBuffer
    from edgerl.runtime.edit_loop import EditLoop, LoopConfig

    spec, net = load_bundle(mlp_bundle)
    with FirmwareProcess(FirmwareConfig(n_cmd=spec.action.dim, watchdog_ms=200)) as fw, \
            SerialTransport(SerialConfig(fw.port)) as t:
        loop = EditLoop(spec, net, ChunkBuffer("replace", spec.action.dim),
                        sink=SerialCommandSink(t), cfg=LoopConfig(rate_hz=100.0,
                                                                  gc_freeze=False))
        loop.obs.write(np.zeros(spec.observation.dim, np.float32), time.perf_counter())
        loop.run_for(seconds=0.3)
        status = t.request_status()
        stats = t.stats()
    # no chunk yet -> the loop's fallback command, but every tick reached the firmware
    assert stats.setpoints_sent >= 20
    assert status["setpoints_applied"] == stats.setpoints_sent
    assert status["mode"] == 1 and status["bad_frames"] == 0


def test_request_status_keeps_its_answer_when_an_unsolicited_status_follows():
    """The firmware sends STATUS on its own (a watchdog trip, a mode change); one arriving
    right after the answer to GET_STATUS must not hide the answer from the waiting request
    (the end-of-run 'no STATUS in 2.0 s' of the HIL)."""
    from edgerl.contract.wire.codec import Msg

    t = SerialTransport(SerialConfig("/dev/null-not-opened"))

    def reply(name: str, **fields) -> bool:  # the device answers, then reports on its own
        assert name == "GET_STATUS"
        for request_us, trips in ((fields["host_time_us"], 0), (0, 1)):
            t._on_msg(Msg("STATUS", 0, {"request_us": request_us, "watchdog_trips": trips}),
                      time.perf_counter())
        return True

    t._send = reply
    got = t.request_status(timeout_s=0.2)
    assert got["request_us"] == 1 and got["watchdog_trips"] == 0
    assert t.latest_status()["watchdog_trips"] == 1  # the newest STATUS is still there
