"""Fixtures of the firmware and HIL tests: the built firmware binaries (host and Cortex-M4),
firmware processes and linked transports. The firmware and HIL test folders import them in
their conftest.py."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from edgerl.hil.firmware import FirmwareConfig, FirmwareProcess, firmware_binary
from edgerl.runtime.serial_transport import SerialConfig, SerialTransport
from tests.helpers.qemu import require_qemu


@pytest.fixture(scope="session")
def fw_binaries() -> dict[str, str]:
    if shutil.which("make") is None or shutil.which("cc") is None:
        pytest.skip("make / cc not installed")
    firmware_binary(policy=False)  # runs `make -C firmware host` once
    return {"plain": str(firmware_binary(False, build=False)),
            "policy": str(firmware_binary(True, build=False))}


@pytest.fixture
def start_fw(fw_binaries) -> Iterator:
    """``start_fw(**FirmwareConfig fields) -> FirmwareProcess``; all stopped at teardown."""
    procs: list[FirmwareProcess] = []

    def start(**kw) -> FirmwareProcess:
        fw = FirmwareProcess(FirmwareConfig(**kw)).start()
        procs.append(fw)
        return fw

    yield start
    for fw in procs:
        fw.stop()


@pytest.fixture
def link(start_fw) -> Iterator:
    """``link(**FirmwareConfig fields) -> (fw, transport)`` connected; closed at teardown."""
    transports: list[SerialTransport] = []

    def make(transport_kw: dict | None = None, **kw):
        fw = start_fw(**kw)
        t = SerialTransport(SerialConfig(fw.port, **(transport_kw or {})))
        transports.append(t)
        t.connect()
        return fw, t

    yield make
    for t in transports:
        t.close()


@pytest.fixture(scope="session")
def qemu_elfs() -> dict[str, Path]:
    """The linked Cortex-M4 firmware images (``make -C firmware qemu-m4`` once)."""
    from edgerl.hil.qemu import qemu_elf

    require_qemu()
    return {"plain": qemu_elf(False), "policy": qemu_elf(True)}


@pytest.fixture
def start_qemu(qemu_elfs) -> Iterator:
    """``start_qemu(**FirmwareConfig fields) -> QemuFirmwareProcess``; stopped at teardown."""
    from edgerl.hil.qemu import QemuFirmwareProcess

    procs: list[FirmwareProcess] = []

    def start(elf: Path | None = None, **kw) -> FirmwareProcess:
        cfg = FirmwareConfig(**kw)
        fw = QemuFirmwareProcess(cfg, elf=elf or qemu_elfs["policy" if cfg.policy else "plain"])
        procs.append(fw.start())
        return fw

    yield start
    for fw in procs:
        fw.stop()
