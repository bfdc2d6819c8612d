"""One host command per plant step: the firmware sends each new plant state once when it is
sensed, and the HIL host writes one observation per plant state (not per STATE echo of an
unchanged one), so a state-triggered edit loop ticks once per plant step. Real host firmware
on a pty, real time: keep runs short."""

from __future__ import annotations

import time

import numpy as np
import pytest

from edgerl.contract.wire import Mode
from edgerl.hil.firmware import FirmwareConfig, FirmwareProcess
from edgerl.hil.harness import HilConfig, run_hil
from edgerl.runtime.serial_transport import SerialConfig, SerialTransport
from edgerl.runtime.serial_types import StateSample

pytestmark = [pytest.mark.hil]


def test_sensor_stamp_is_the_firmware_time_of_the_sample_and_wraps():
    def sample(fw_time_us: int, age_us: int) -> StateSample:
        return StateSample(0.0, fw_time_us, 0, Mode.IDLE, np.zeros(1, np.float32),
                           np.zeros(1, np.float32), age_us)

    assert sample(1_000_500, 500).sensor_stamp_us == 1_000_000
    assert sample(5, 10).sensor_stamp_us == 2**32 - 5  # firmware clock wrapped since sensing
    assert sample(2_000_000, 1_000_000).sensor_stamp_us == sample(1_500_000,
                                                                  500_000).sensor_stamp_us


def test_firmware_sends_each_new_plant_state_once_when_sensed(fw_binaries):
    # no state period, no setpoints: every STATE here is one the sensor samples caused
    states: list[StateSample] = []
    with FirmwareProcess(FirmwareConfig(state_period_ms=0, status_period_ms=0)) as fw, \
            SerialTransport(SerialConfig(fw.port), on_state=states.append) as t:
        assert t.connected
        sent = [np.array([0.1 * i, -0.2, 0.3, 0.5 * i], np.float32) for i in range(1, 6)]
        for i, s in enumerate(sent):
            fw.send_sensor(s, 0.02 * i)
            time.sleep(0.02)
        deadline = time.monotonic() + 2.0
        while len(states) < len(sent) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # nothing more may come
    assert len(states) == len(sent)
    assert len({s.sensor_stamp_us for s in states}) == len(sent)
    for got, want in zip(states, sent):
        np.testing.assert_array_equal(got.state, want)
        assert got.sensor_age_us < 5_000  # sent as sensed, not at a later echo or period


def test_state_triggered_host_loop_ticks_once_per_plant_step(fw_binaries, tmp_path):
    # the firmware echoes the newest state after every setpoint: ticking on each echo gave
    # ~15 ticks (and setpoints) per 50 Hz plant step before the loop took one per new state
    pytest.importorskip("torch", reason="edgerl hil steps a torch plant")
    from tests.helpers.bundles import write_state_trigger_bundle

    bundle = write_state_trigger_bundle(tmp_path / "b")
    res = run_hil(HilConfig(bundle=bundle, task="cartpole", max_steps=50, check_estop=False,
                            link_probe=0)).as_dict()
    steps = res["steps"]
    assert steps >= 20
    # one per plant state (the first state + one per step) plus at most a few clock
    # fallbacks where a state came later than the trigger's 1.5-period timeout
    assert 0.9 * steps <= res["host_ticks"] <= steps + 3
    assert res["host_ticks_per_step"] == round(res["host_ticks"] / steps, 3)
    assert res["setpoints_sent"] == res["host_ticks"]  # each tick sends its command
