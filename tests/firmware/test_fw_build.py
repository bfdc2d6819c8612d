"""The firmware core builds warning-free (-Werror) for a 32-bit MCU target."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from edgerl.hil.firmware import FIRMWARE_DIR


def test_core_cross_compiles_for_cortex_m4(tmp_path):
    if shutil.which("arm-none-eabi-gcc") is None:
        reason = "arm-none-eabi-gcc not installed (Debian: gcc-arm-none-eabi)"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    res = subprocess.run(["make", "-s", "-C", str(FIRMWARE_DIR), f"BUILD={tmp_path}", "cross"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "arm-none-eabi-gcc OK" in res.stdout
    for obj in ("wire_arm.o", "app_arm.o"):
        header = (tmp_path / obj).read_bytes()[:20]
        assert header[:4] == b"\x7fELF" and header[4] == 1  # ELFCLASS32
        assert int.from_bytes(header[18:20], "little") == 40  # EM_ARM
