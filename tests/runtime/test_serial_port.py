"""The serial port under the link (``serial_port``, ``serial_types``): options checked, a
missing port raises with no reader thread left behind."""

from __future__ import annotations

import threading

import pytest

from edgerl.runtime.serial_transport import SerialConfig, SerialTransport


def _reader_threads() -> int:
    return sum(t.name == "serial-reader" for t in threading.enumerate())


def test_config_validation():
    with pytest.raises(ValueError, match="port is empty"):
        SerialConfig("")
    with pytest.raises(ValueError, match="hello_attempts"):
        SerialConfig("/dev/null", hello_attempts=0)


def test_missing_port_raises_oserror():
    before = _reader_threads()
    t = SerialTransport(SerialConfig("/dev/edgerl-no-such-port"))
    with pytest.raises(OSError, match="edgerl-no-such-port"):
        t.connect()
    assert _reader_threads() == before and not t.connected
