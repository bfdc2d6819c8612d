"""Fixtures for runtime tests: real bundles written with ``onnx`` (see tests/helpers/bundles.py)."""

from __future__ import annotations

import os
import threading

import pytest

from tests.helpers.bundles import write_mlp_bundle


@pytest.fixture
def mlp_bundle(tmp_path):
    """An edit-method MLP bundle: obs 4, action 2, 100 Hz, chunk 10 x 10 ms."""
    return write_mlp_bundle(tmp_path / "bundle", hidden=(32, 32))


@pytest.fixture
def make_bundle(tmp_path):
    """``make_bundle(name, **kw)`` -> path of a bundle written by ``write_mlp_bundle``."""
    def _make(name: str = "b", **kw):
        return write_mlp_bundle(tmp_path / name, **kw)
    return _make


def _fifo_allowed() -> bool:
    """Whether a thread may switch itself to SCHED_FIFO (root / CAP_SYS_NICE on Linux)."""
    result = []

    def probe():
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            result.append(True)
        except (AttributeError, OSError):
            result.append(False)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return result[0]


@pytest.fixture(scope="session")
def rt_priority():
    """50 where the loop thread may run SCHED_FIFO (as deployed), else 0 (normal)."""
    return 50 if _fifo_allowed() else 0
