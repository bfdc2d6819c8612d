"""Where the HIL firmware runs: ``host`` (the POSIX build as a process on a pty) or
``qemu-m4`` (the Cortex-M4 build on the emulated MPS2 AN386 board). Both give a
:class:`~edgerl.hil.firmware.FirmwareProcess` with the same interface."""

from __future__ import annotations

from edgerl.hil.firmware import FirmwareConfig, FirmwareProcess

__all__ = ["TARGETS", "make_firmware"]

TARGETS = ("host", "qemu-m4")


def make_firmware(cfg: FirmwareConfig, target: str = "host") -> FirmwareProcess:
    """An unstarted firmware process for ``target`` (``ValueError`` for an unknown one)."""
    if target == "host":
        return FirmwareProcess(cfg)
    if target == "qemu-m4":
        from edgerl.hil.qemu import QemuFirmwareProcess

        return QemuFirmwareProcess(cfg)
    raise ValueError(f"unknown firmware target {target!r}: expected one of {TARGETS}")
