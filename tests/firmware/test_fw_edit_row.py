"""The fast loop's row lookup (``edgerl_edit_row``, firmware/src/edit.c) under UBSan.

A CRC-valid CHUNK may carry any ``dt_us`` up to 2^31 - 1; the row lookup must give the floor of
the chunk offset without a signed overflow (a C compiler may do anything after one). The
driver aborts on any undefined behaviour (``-fno-sanitize-recover=all``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

FIRMWARE = Path(__file__).resolve().parents[2] / "firmware"
#: the example edit header the driver is built with (the Makefile's EDIT_H default)
STALE_STEPS = int(re.search(r"#define EDGERL_EDIT_STALE_STEPS (\d+)",
                            (FIRMWARE / "examples/tiny_edit/edit_policy.h").read_text())[1])


@pytest.fixture(scope="module")
def driver() -> Path:
    if shutil.which("make") is None or shutil.which("cc") is None:
        pytest.skip("make / cc not installed")
    res = subprocess.run(["make", "-s", "-C", str(FIRMWARE), "build/edit_row_ubsan"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return FIRMWARE / "build" / "edit_row_ubsan"


def rows(driver: Path, dt: int, t0: int, horizon: int, nows: list[int]) -> list[int]:
    res = subprocess.run([str(driver), str(dt), str(t0), str(horizon), *map(str, nows)],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, f"rc {res.returncode}: {res.stderr[-2000:]}"
    return [int(line) for line in res.stdout.split()]


def expected(dt: int, t0: int, horizon: int, now: int) -> int:
    """The reference: floor((now - t0) / dt) on the wrapped 32-bit clock difference."""
    d = (now - t0) & 0xFFFFFFFF
    d = d - (1 << 32) if d >= 1 << 31 else d
    offset = d // dt
    if offset >= horizon + STALE_STEPS:
        return -1
    return 0 if offset < 0 else min(offset, horizon - 1)


@pytest.mark.parametrize("dt", [1, 7, 20_000, 1_000_003, 0x7FFFFFFF])
def test_edit_row_is_the_floored_offset_without_overflow(driver, dt):
    t0 = 1_000_000
    horizon = 8
    nows = [0, 5, t0 - 1, t0, t0 + dt - 1, t0 + dt, t0 + 3 * dt, t0 + 40 * dt,
            t0 + (horizon + STALE_STEPS) * dt - 1, t0 + (horizon + STALE_STEPS) * dt,
            (t0 + 0x7FFFFFFF) & 0xFFFFFFFF, (t0 - 0x7FFFFFFF) & 0xFFFFFFFF,
            (t0 + (1 << 31)) & 0xFFFFFFFF]
    nows = [n & 0xFFFFFFFF for n in nows]
    assert rows(driver, dt, t0, horizon, nows) == [expected(dt, t0, horizon, n) for n in nows]


def test_the_largest_step_a_chunk_may_carry_reads_rows_in_order(driver):
    """dt_us = 0x7FFFFFFF (what an unchecked 32-bit floor overflowed on): before t0 row 0, at
    t0 row 0, one step later row 1."""
    assert rows(driver, 0x7FFFFFFF, 1_000_000, 2, [5, 1_000_000, 1_000_000 + 0x7FFFFFFF]) \
        == [0, 0, 1]
