"""The serial port under the firmware link: open/close, a reader thread that reconnects.

:class:`SerialPort` owns the pyserial port (a pty slave printed by the host firmware,
/dev/ttyACM0, ...), opened exclusive; writes frames (each after a leading delimiter, through the
optional ``tx_filter``); runs the reader thread, which hands received bytes to
``_on_bytes`` and, when the port fails (cable pulled, firmware restarted), reopens it with
exponential backoff and redoes the handshake (``cfg.reconnect``); :meth:`SerialPort.unplug` /
:meth:`SerialPort.replug` simulate a cable pull. The protocol on top (handshake, messages) is
:class:`~edgerl.runtime.serial_transport.SerialTransport`, which implements ``_handshake``,
``_on_bytes`` and ``_on_open``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import TypeVar

import serial

from edgerl.runtime.serial_types import ByteFilter, HelloInfo, SerialConfig

__all__ = ["SerialPort"]

log = logging.getLogger(__name__)

_P = TypeVar("_P", bound="SerialPort")


class SerialPort:
    """The port and its reader thread; thread-safe writes.

    Args:
        config: Port and timing options.
        tx_filter: Optional hook applied to each outgoing frame (fault injection).

    Attributes:
        link_failures: Port failures seen (read or write errors of the current port).
    """

    def __init__(self, config: SerialConfig, tx_filter: ByteFilter | None = None) -> None:
        self.cfg = config
        self.tx_filter = tx_filter
        self._ser: serial.Serial | None = None
        self._tx_lock = threading.RLock()
        self._cv = threading.Condition()
        self._reader: threading.Thread | None = None
        self._stop = threading.Event()
        self._linked = False
        self._unplugged = False
        self.link_failures = 0

    # --- protocol hooks -------------------------------------------------------------------------
    def _handshake(self) -> HelloInfo:
        """Link up on a freshly opened port (sets ``_linked``); raise if refused."""
        raise NotImplementedError

    def _on_bytes(self, data: bytes) -> None:
        """Bytes read from the port (reader thread)."""
        raise NotImplementedError

    def _on_open(self) -> None:
        """The port was (re)opened: drop any half-parsed input."""

    # --- connection ---------------------------------------------------------------------------
    def connect(self) -> HelloInfo:
        """Open the port and handshake. Raises LinkRefused, TransportTimeout or OSError."""
        if self._reader is None:
            self._stop.clear()
            self._open()
            self._reader = threading.Thread(target=self._read_loop, name="serial-reader",
                                            daemon=True)
            self._reader.start()
        try:
            return self._handshake()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop the reader and close the port (idempotent)."""
        self._stop.set()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=2.0)
        self._reader = None
        self._close_port()

    def __enter__(self: _P) -> _P:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connected(self) -> bool:
        """Port open and handshake accepted."""
        return self._linked and self._ser is not None

    def unplug(self) -> None:
        """Close the port as if the cable were pulled (the reader will not reconnect until
        :meth:`replug`)."""
        with self._cv:
            self._linked = False
            self._unplugged = True
        self._close_port()

    def replug(self) -> HelloInfo:
        """Reopen the port after :meth:`unplug` and redo the handshake."""
        deadline = time.monotonic() + self.cfg.hello_timeout_s
        while True:
            try:
                self._open()
                break
            except (OSError, serial.SerialException):
                # the reader thread may still be in select() on the old fd, which keeps
                # its exclusive lock for up to read_timeout_s (closed: ConnectionError, raised)
                if time.monotonic() > deadline or self._stop.is_set():
                    raise
                time.sleep(self.cfg.read_timeout_s / 2)
        with self._cv:
            self._unplugged = False
        return self._handshake()

    def _open(self) -> None:
        """Open the port (exclusive). Refused once :meth:`close` ran: a late re-plug or
        reconnect must not take the path back, which by then may name another device (a
        pty number is reused by the next emulator)."""
        self._refuse_if_closed()
        ser = serial.Serial(self.cfg.port, self.cfg.baudrate, timeout=self.cfg.read_timeout_s,
                            write_timeout=0.5, exclusive=True)
        ser.reset_input_buffer()
        with self._cv:  # close() sets _stop before it swaps _ser out under this lock
            if self._stop.is_set():
                ser.close()
                self._refuse_if_closed()
            self._on_open()
            self._ser = ser

    def _refuse_if_closed(self) -> None:
        if self._stop.is_set():
            raise ConnectionError(f"serial port {self.cfg.port} was closed: not reopening it")

    def _close_port(self) -> None:
        with self._cv:
            ser, self._ser = self._ser, None
            self._linked = False
        if ser is not None:
            with contextlib.suppress(OSError, serial.SerialException):
                ser.close()


    # --- sending ------------------------------------------------------------------------------
    def _write(self, data: bytes, raw: bool = False) -> bool:
        ser = self._ser
        if ser is None:
            return False
        if not raw:
            # a leading delimiter ends any line noise before the frame, so noise costs
            # one bad frame of its own instead of also taking this frame with it
            data = b"\x00" + (self.tx_filter(data) if self.tx_filter is not None else data)
        try:
            ser.write(data)
        except (OSError, serial.SerialException, TypeError, AttributeError) as exc:
            log.debug("serial write failed: %s", exc)
            self._link_failed(ser)
            return False
        return True


    def _read_loop(self) -> None:
        backoff = self.cfg.reconnect_backoff_s[0]
        while not self._stop.is_set():
            ser = self._ser
            if ser is None:
                if self._unplugged or not self.cfg.reconnect:
                    time.sleep(self.cfg.read_timeout_s)
                    continue
                time.sleep(backoff)
                backoff = min(backoff * 2, self.cfg.reconnect_backoff_s[1])
                self._try_reconnect()
                continue
            try:
                data = ser.read(max(1, ser.in_waiting))
            except (OSError, serial.SerialException, TypeError, AttributeError) as exc:
                # only a failure of the current port counts (not one closed by unplug())
                if not self._stop.is_set() and ser is self._ser:
                    log.warning("serial read failed on %s: %s", self.cfg.port, exc)
                    self._link_failed(ser)
                continue
            if data:
                backoff = self.cfg.reconnect_backoff_s[0]
                self._on_bytes(data)

    def _try_reconnect(self) -> None:
        try:
            self._open()
        except (OSError, serial.SerialException) as exc:  # ConnectionError: closed meanwhile
            log.debug("reconnect to %s failed: %s", self.cfg.port, exc)
            return
        threading.Thread(target=self._rehandshake, daemon=True).start()

    def _rehandshake(self) -> None:
        try:
            self._handshake()
            log.info("reconnected to %s", self.cfg.port)
        except (ConnectionError, TimeoutError, OSError) as exc:
            log.warning("re-handshake on %s failed: %s", self.cfg.port, exc)
            self._link_failed(self._ser)

    def _link_failed(self, ser: serial.Serial | None) -> None:
        """Port ``ser`` failed: close it if it is still the current one."""
        with self._tx_lock:
            if ser is None or ser is not self._ser:
                return
            self.link_failures += 1
            self._close_port()
