"""The firmware built with a policy.h exported by edgerl.export (the exported C header) runs it on
the MCU side: output equals onnxruntime's on the same observation."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from edgerl.contract.wire import Mode
from edgerl.hil.firmware import FIRMWARE_DIR, FirmwareConfig, FirmwareProcess
from edgerl.runtime.serial_transport import SerialConfig, SerialTransport

pytestmark = pytest.mark.hil


def test_exported_policy_h_runs_in_firmware(fw_binaries, tmp_path):
    c_header = pytest.importorskip("edgerl.export.c_header")
    ort = pytest.importorskip("onnxruntime")
    from tests.helpers.bundles import mlp_onnx, random_mlp
    ws, bs = random_mlp([4, 16, 16, 2], seed=5)
    onnx_path = tmp_path / "policy.onnx"
    onnx_path.write_bytes(mlp_onnx(ws, bs, activation="Tanh"))
    header = tmp_path / "policy.h"
    c_header.write_c_header(onnx_path, header)
    build = tmp_path / "build"
    res = subprocess.run(["make", "-s", "-C", str(FIRMWARE_DIR), f"BUILD={build}",
                          f"POLICY_H={header}", f"{build}/edgerl_fw_host_policy"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr  # -Wall -Wextra -Werror -pedantic with it
    obs = np.float32([0.2, -0.4, 0.1, 0.3])
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    expected = sess.run(None, {sess.get_inputs()[0].name: obs[None]})[0][0]
    cfg = FirmwareConfig(n_cmd=2, policy=True)
    with FirmwareProcess(cfg, binary=build / "edgerl_fw_host_policy") as fw, \
            SerialTransport(SerialConfig(fw.port)) as t:
        assert t.hello.has_policy
        fw.send_sensor(obs, 0.0)
        t.set_mode(Mode.LOCAL_POLICY)
        a = fw.wait_actuator(lambda a: a.mode == Mode.LOCAL_POLICY
                             and np.abs(a.cmd - expected).max() < 1e-5, 2.0)
    assert a is not None, (fw.actuator, expected)
