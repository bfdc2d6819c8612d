"""Fixtures: the built firmware binaries, firmware processes and linked transports."""

from __future__ import annotations

from tests.helpers.firmware import fw_binaries, link, qemu_elfs, start_fw, start_qemu

__all__ = ["fw_binaries", "link", "qemu_elfs", "start_fw", "start_qemu"]
