"""Whether the Cortex-M4 tests can run here: skip where the tools are absent, fail in CI."""

from __future__ import annotations

import os

import pytest


def require_qemu() -> None:
    """Skip (with the reason) where qemu-system-arm / arm-none-eabi-gcc are absent; in CI
    (``CI=true``) fail instead: .ci/run installs them, so their absence is a broken job."""
    from edgerl.hil.qemu import qemu_missing

    reason = qemu_missing()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"CI=true but the Cortex-M4 target cannot run: {reason}")
    pytest.skip(reason)
