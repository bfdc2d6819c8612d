"""Run the host build of the firmware as a child process on a pty.

:class:`FirmwareProcess` starts ``firmware/build/edgerl_fw_host`` with ``--plant-stdio``:
the firmware prints ``EDGERL_FW_PTY <path>`` (the serial port for
:class:`~edgerl.runtime.serial_transport.SerialTransport`), then reads SENSOR frames on its
stdin and writes ACTUATOR frames on its stdout. A reader thread parses the ACTUATOR stream.
The firmware exits when its stdin closes, so it never outlives this process.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import select
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgerl.contract.wire import FrameParser, Mode, decode, encode

__all__ = ["FIRMWARE_DIR", "ActuatorSample", "FirmwareConfig", "FirmwareError",
           "FirmwareProcess", "firmware_binary"]

log = logging.getLogger(__name__)

FIRMWARE_DIR = Path(__file__).resolve().parents[1] / "firmware"


class FirmwareError(RuntimeError):
    """The firmware binary is missing or did not start."""


def firmware_binary(policy: bool = False, build: bool = True) -> Path:
    """Path of the host firmware binary (``make -C firmware host`` first if ``build``)."""
    name = "edgerl_fw_host_policy" if policy else "edgerl_fw_host"
    path = FIRMWARE_DIR / "build" / name
    if build and (FIRMWARE_DIR / "Makefile").exists():
        res = subprocess.run(["make", "--no-print-directory", "-s", "-C", str(FIRMWARE_DIR),
                              "host"], capture_output=True, text=True)
        if res.returncode != 0:
            raise FirmwareError(f"building the firmware failed:\n{res.stderr[-2000:]}")
    if not path.exists():
        raise FirmwareError(f"{path} not found: run `make -C firmware host`")
    return path


@dataclass
class FirmwareConfig:
    """Host firmware command line.

    Attributes:
        watchdog_ms: No valid command for this long => safe state.
        safe: ``zero`` or ``hold``.
        n_cmd: Joints driven.
        state_period_ms: STATE at least this often while linked (0: only per setpoint).
        status_period_ms: STATUS period (0: only on events).
        policy: Use the build with the on-MCU policy (``policy.h``).
        device: Use this serial device instead of a new pty (host build only).
        fallback: On a watchdog trip: ``safe`` (the safe action) or ``policy`` (the on-MCU
            policy holds the robot until the host is back; needs ``policy``).
        cmd_limit: The firmware rejects a SETPOINT with a value beyond +-cmd_limit (the
            action limits); 0 = the build's compiled-in limit (finiteness only by default).
    """

    watchdog_ms: int = 100
    safe: str = "zero"
    n_cmd: int = 1
    state_period_ms: int = 20
    status_period_ms: int = 100
    policy: bool = False
    device: str | None = None
    fallback: str = "safe"
    cmd_limit: float = 0.0

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first bad field."""
        if self.safe not in ("zero", "hold"):
            raise ValueError(f"safe must be 'zero' or 'hold', got {self.safe!r}")
        if self.fallback not in ("safe", "policy"):
            raise ValueError(f"fallback must be 'safe' or 'policy', got {self.fallback!r}")
        if self.fallback == "policy" and not self.policy:
            raise ValueError("fallback='policy' needs the build with the on-MCU policy "
                             "(policy=True)")
        if not 1 <= self.watchdog_ms <= 60000:
            raise ValueError(f"watchdog_ms must be in 1..60000, got {self.watchdog_ms}")
        if not (math.isfinite(self.cmd_limit) and self.cmd_limit >= 0):
            raise ValueError(f"cmd_limit must be finite and >= 0, got {self.cmd_limit}")

    def argv(self) -> list[str]:
        self.validate()
        out = ["--plant-stdio", "--watchdog-ms", str(self.watchdog_ms), "--safe", self.safe,
               "--n-cmd", str(self.n_cmd), "--state-period-ms", str(self.state_period_ms),
               "--status-period-ms", str(self.status_period_ms), "--fallback", self.fallback]
        if self.cmd_limit > 0:
            out += ["--cmd-limit", repr(float(self.cmd_limit))]
        if self.device:
            out += ["--device", self.device]
        return out


@dataclass(frozen=True)
class ActuatorSample:
    """One ACTUATOR output: host receive time (s), firmware time (us), mode, command."""

    t_host: float
    fw_time_us: int
    mode: Mode
    cmd: np.ndarray


class FirmwareProcess:
    """The firmware host binary as a child process (context manager).

    Attributes:
        port: The pty slave path to open with pyserial.
        actuator: Newest :class:`ActuatorSample` (None before the first).
        history: Every actuator output, in order (for assertions and timing).
    """

    def __init__(self, cfg: FirmwareConfig | None = None, binary: Path | None = None,
                 start_timeout_s: float = 5.0) -> None:
        self.cfg = cfg or FirmwareConfig()
        self.binary = binary or firmware_binary(self.cfg.policy)
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = ""
        self.actuator: ActuatorSample | None = None
        self.history: list[ActuatorSample] = []
        self._cv = threading.Condition()
        self._reader: threading.Thread | None = None
        self._plant_seq = 0
        self._parser = FrameParser()

    def start(self) -> FirmwareProcess:
        argv = [str(self.binary), *self.cfg.argv()]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, bufsize=0)
        line = self._read_line(self.start_timeout_s)
        if not line.startswith("EDGERL_FW_PTY "):
            err = self._stop_and_collect()
            raise FirmwareError(f"firmware did not start ({argv}): {line!r} {err}")
        self.port = line.split(" ", 1)[1].strip()
        self._start_reader()
        log.debug("firmware pid %d on %s", self.proc.pid, self.port)
        return self

    def _read_line(self, timeout_s: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + timeout_s
        while not buf.endswith(b"\n") and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                ch = os.read(fd, 1)
                if not ch:
                    break
                buf += ch
        return buf.decode(errors="replace")

    def _plant_read(self) -> bytes:
        """Block for the next bytes of the plant link (ACTUATOR frames); b"" at its end
        (also once :meth:`stop` has let go of the process)."""
        proc = self.proc
        if proc is None or proc.stdout is None:
            return b""
        return os.read(proc.stdout.fileno(), 4096)

    def _plant_write(self, data: bytes) -> None:
        """Write bytes to the firmware's sensor HAL."""
        assert self.proc is not None and self.proc.stdin is not None
        os.write(self.proc.stdin.fileno(), data)

    def _start_reader(self) -> None:
        self._reader = threading.Thread(target=self._read_loop, name="fw-plant-reader",
                                        daemon=True)
        self._reader.start()

    def _read_loop(self) -> None:
        while True:
            try:
                data = self._plant_read()
            except (OSError, ValueError):  # ValueError: the pipe was closed by stop()
                break
            if not data:
                break
            now = time.perf_counter()
            for frame in self._parser.feed(data):
                msg = decode(frame)
                if msg is None or msg.name != "ACTUATOR":
                    continue
                f = msg.fields
                mode = Mode(f["mode"]) if f["mode"] in Mode._value2member_map_ else Mode.IDLE
                sample = ActuatorSample(now, f["fw_time_us"], mode,
                                        np.asarray(f["cmd"][:f["n"]], np.float32))
                with self._cv:
                    self.actuator = sample
                    self.history.append(sample)
                    self._cv.notify_all()

    def send_sensor(self, state: Sequence[float] | np.ndarray, plant_time_s: float) -> None:
        """Write the plant state to the firmware's sensor HAL (stdin)."""
        state = np.asarray(state, np.float32).reshape(-1)
        frame = encode("SENSOR", self._plant_seq, plant_time_us=int(plant_time_s * 1e6)
                       & 0xFFFFFFFF, n=state.shape[0], state=state.tolist())
        self._plant_seq = (self._plant_seq + 1) & 0xFFFF
        self._plant_write(frame)

    def wait_actuator(self, pred, timeout_s: float) -> ActuatorSample | None:
        """Wait until ``pred(newest sample)`` holds; returns that sample or None."""
        def ok() -> bool:
            return self.actuator is not None and bool(pred(self.actuator))
        with self._cv:
            self._cv.wait_for(ok, timeout_s)
            return self.actuator if ok() else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _stop_and_collect(self) -> str:
        proc, self.proc = self.proc, None
        if proc is None:
            return ""
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=2.0)
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        return err

    def stop(self) -> int | None:
        """Close stdin (the firmware exits), wait, reap; returns the exit code."""
        proc = self.proc
        err = self._stop_and_collect()
        if self._reader is not None:
            self._reader.join(timeout=2.0)
            self._reader = None
        if err.strip():
            log.debug("firmware stderr: %s", err.strip())
        return None if proc is None else proc.returncode

    def __enter__(self) -> FirmwareProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
