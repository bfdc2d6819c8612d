"""The Cortex-M4 firmware (``firmware/boards/mps2_an386``) in ``qemu-system-arm``.

:class:`QemuFirmwareProcess` is a :class:`~edgerl.hil.firmware.FirmwareProcess` whose
firmware is the linked ELF ``make -C firmware qemu-m4`` builds, run on the emulated MPS2 AN386
board (Cortex-M4F)::

    qemu-system-arm -M mps2-an386 -nodefaults -display none -nic none
        -serial pty                                      # UART0: the host link (pyserial)
        -serial unix:<tmp>/plant.sock,server=on,wait=on  # UART1: SENSOR in / ACTUATOR out
        -device loader,addr=0x20000000,data=...,data-len=4 ...   # the boot configuration
        -kernel edgerl_fw_m4.elf

QEMU prints ``char device redirected to /dev/pts/N (label serial0)``: that is ``port``. This
process keeps the pty's slave open for QEMU's lifetime, like a USB-serial adapter that stays
enumerated: QEMU polls a pty whose slave nobody holds only once a second, so without it a
re-plugged host would wait up to 1 s for its HELLO to be read. A host "cable pull" still cuts
the link both ways (the host's port is closed; what the board sends meanwhile is flushed when
the host reopens it). The plant socket is connected before the guest starts (``wait=on``),
so no output is lost. The firmware's options (:class:`~edgerl.hil.firmware.FirmwareConfig`)
are written into RAM at ``BOOT_CONFIG_ADDR`` (``board_boot_config_t`` in
``boards/mps2_an386/board_hal.h``) before reset, where a real board would read them from
flash.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgerl.hil.firmware import FIRMWARE_DIR, FirmwareConfig, FirmwareError, FirmwareProcess

__all__ = ["BOOT_CONFIG_ADDR", "BOOT_CONFIG_MAGIC", "QEMU_MACHINE", "PolicyBenchResult",
           "QemuFirmwareProcess", "boot_config_words", "policy_bench_elf", "qemu_elf",
           "qemu_missing", "run_policy_bench"]

log = logging.getLogger(__name__)

QEMU = "qemu-system-arm"
QEMU_MACHINE = "mps2-an386"
BOOT_CONFIG_ADDR = 0x20000000
BOOT_CONFIG_MAGIC = 0xED6E4C01
M4_BUILD = FIRMWARE_DIR / "build" / "m4"
_PTY_RE = re.compile(r"char device redirected to (\S+) \(label serial0\)")


def qemu_missing() -> str | None:
    """Why the Cortex-M4 target cannot run here (None if it can): the missing tools."""
    missing = [tool for tool in (QEMU, "arm-none-eabi-gcc", "make")
               if shutil.which(tool) is None]
    if not missing:
        return None
    return (f"{', '.join(missing)} not installed (Debian: apt-get install qemu-system-arm "
            "gcc-arm-none-eabi libnewlib-arm-none-eabi)")


def qemu_elf(policy: bool = False, build: bool = True, policy_h: Path | None = None,
             build_dir: Path | None = None) -> Path:
    """Path of the linked Cortex-M4 firmware (``make -C firmware qemu-m4`` first if
    ``build``); ``policy_h`` builds the policy variant with that exported header."""
    out = build_dir or M4_BUILD
    name = "edgerl_fw_m4_policy.elf" if policy else "edgerl_fw_m4.elf"
    path = out / name
    if build:
        reason = qemu_missing()
        if reason:
            raise FirmwareError(f"cannot build the Cortex-M4 firmware: {reason}")
        # the rule names its targets under M4_BUILD: give it the absolute directory, so the
        # absolute target below matches a rule whether or not the file exists yet
        cmd = ["make", "--no-print-directory", "-s", "-C", str(FIRMWARE_DIR),
               f"M4_BUILD={Path(out).resolve()}"]
        if policy_h is not None:
            cmd.append(f"POLICY_H={Path(policy_h).resolve()}")
        res = subprocess.run([*cmd, str(Path(path).resolve())], capture_output=True, text=True)
        if res.returncode != 0:
            raise FirmwareError(f"building {name} failed:\n{res.stderr[-2000:]}")
    if not path.exists():
        raise FirmwareError(f"{path} not found: run `make -C firmware qemu-m4`")
    return path


def boot_config_words(cfg: FirmwareConfig) -> list[int]:
    """``board_boot_config_t`` as 32-bit words (the order of ``board_hal.h``)."""
    cfg.validate()
    if cfg.device:
        raise ValueError("FirmwareConfig.device is for the host build; the QEMU target's "
                         "serial port is the pty QEMU creates")
    return [BOOT_CONFIG_MAGIC, cfg.watchdog_ms * 1000, 0 if cfg.safe == "zero" else 1,
            cfg.n_cmd, cfg.state_period_ms * 1000, cfg.status_period_ms * 1000,
            1 if cfg.fallback == "policy" else 0, 0]


def _loader_args(words: list[int]) -> list[str]:
    out: list[str] = []
    for i, w in enumerate(words):
        out += ["-device", f"loader,addr=0x{BOOT_CONFIG_ADDR + 4 * i:08X},"
                           f"data=0x{w:08X},data-len=4"]
    return out


class QemuFirmwareProcess(FirmwareProcess):
    """The Cortex-M4 firmware in QEMU (context manager), with the host build's interface:
    ``port``, ``actuator``, ``history``, ``send_sensor``, ``wait_actuator``, ``stop``.

    Args:
        cfg: Firmware options (written as the boot configuration).
        elf: Firmware image (default: :func:`qemu_elf`).
        icount: QEMU ``-icount`` shift (None: real time, the emulator's clock follows the
            host's). With a shift, emulated time counts instructions (2**shift ns each)
            and advances at real speed while the core sleeps.
    """

    def __init__(self, cfg: FirmwareConfig | None = None, elf: Path | None = None,
                 start_timeout_s: float = 10.0, icount: int | None = None) -> None:
        cfg = cfg or FirmwareConfig()
        self.elf = elf or qemu_elf(cfg.policy)
        super().__init__(cfg, binary=self.elf, start_timeout_s=start_timeout_s)
        self.icount = icount
        self._tmp: str | None = None
        self._sock: socket.socket | None = None
        self._keeper: int | None = None

    def argv(self, sock_path: str) -> list[str]:
        """The QEMU command line."""
        out = [QEMU, "-M", QEMU_MACHINE, "-nodefaults", "-display", "none", "-nic", "none",
               "-serial", "pty", "-serial", f"unix:{sock_path},server=on,wait=on",
               *_loader_args(boot_config_words(self.cfg)), "-kernel", str(self.elf)]
        if self.icount is not None:
            out += ["-icount", f"shift={int(self.icount)},sleep=on"]
        return out

    def start(self) -> QemuFirmwareProcess:
        reason = qemu_missing()
        if reason:
            raise FirmwareError(f"cannot run the QEMU target: {reason}")
        self._tmp = tempfile.mkdtemp(prefix="edgerl_qemu_")
        sock_path = os.path.join(self._tmp, "plant.sock")
        argv = self.argv(sock_path)
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, bufsize=0)
        line = self._read_line(self.start_timeout_s)
        m = _PTY_RE.search(line)
        if m is None:
            err = self._stop_and_collect()
            raise FirmwareError(f"QEMU did not start ({' '.join(argv)}): {line!r} {err}")
        self.port = m.group(1)
        self._keeper = os.open(self.port, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        self._sock = self._connect_plant(sock_path)
        self._start_reader()
        log.debug("qemu pid %d: host link %s, plant %s", self.proc.pid, self.port, sock_path)
        return self

    def _connect_plant(self, path: str) -> socket.socket:
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(path)
                return sock
            except OSError as exc:
                sock.close()
                if time.monotonic() > deadline or not self.alive:
                    err = self._stop_and_collect()
                    raise FirmwareError(f"QEMU's plant socket {path}: {exc} {err}") from None
                time.sleep(0.01)

    def _plant_read(self) -> bytes:
        sock = self._sock
        return b"" if sock is None else sock.recv(4096)

    def _plant_write(self, data: bytes) -> None:
        assert self._sock is not None
        self._sock.sendall(data)

    def _stop_and_collect(self) -> str:
        proc, self.proc = self.proc, None
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
            self._sock = None
        err = ""
        if proc is not None:
            proc.terminate()
            try:
                _, err_b = proc.communicate(timeout=5.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err_b = proc.communicate(timeout=5.0)
            err = err_b.decode(errors="replace")
        if self._keeper is not None:
            os.close(self._keeper)
            self._keeper = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None
        return err


@dataclass(frozen=True)
class PolicyBenchResult:
    """``policy.h`` on the emulated Cortex-M4F.

    Attributes:
        actions: (N, out_dim) float32 outputs, one row per observation.
        instructions: (N,) instructions per forward pass (``-icount shift=0``: one
            instruction is 1 ns of emulated time, read from SysTick at the core clock, so
            the resolution is 1e9 / BOARD_SYSCLK_HZ = 40 instructions per sample).
    """

    actions: np.ndarray
    instructions: np.ndarray


SYSCLK_HZ = 25_000_000


def policy_bench_elf(policy_h: Path, build_dir: Path) -> Path:
    """Build ``policy_bench_m4.elf`` (``boards/mps2_an386/policy_bench.c``) with ``policy_h``."""
    reason = qemu_missing()
    if reason:
        raise FirmwareError(f"cannot build the policy bench: {reason}")
    out = Path(build_dir) / "policy_bench_m4.elf"
    res = subprocess.run(["make", "--no-print-directory", "-s", "-C", str(FIRMWARE_DIR),
                          f"M4_BUILD={Path(build_dir).resolve()}",
                          f"POLICY_H={Path(policy_h).resolve()}", str(out.resolve())],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise FirmwareError(f"building {out.name} failed:\n{res.stderr[-2000:]}")
    return out


def run_policy_bench(elf: Path, observations: np.ndarray, out_dim: int,
                     timeout_s: float = 120.0) -> PolicyBenchResult:
    """Run ``observations`` (N, in_dim) through ``policy.h`` on the emulated M4 (UART0 on
    QEMU's stdio, ``-icount shift=0``); returns outputs and instructions per inference."""
    obs = np.ascontiguousarray(observations, dtype="<f4")
    if obs.ndim != 2 or obs.shape[0] < 1:
        raise ValueError(f"observations must be (N, in_dim) with N >= 1, got {obs.shape}")
    argv = [QEMU, "-M", QEMU_MACHINE, "-nodefaults", "-display", "none", "-nic", "none",
            "-serial", "stdio", "-semihosting-config", "enable=on,target=native",
            "-icount", "shift=0", "-kernel", str(elf)]
    blob = struct.pack("<I", obs.shape[0]) + obs.tobytes()
    res = subprocess.run(argv, input=blob, capture_output=True, timeout=timeout_s)
    rec = 4 * out_dim + 4
    want = rec * obs.shape[0]
    if res.returncode != 0 or len(res.stdout) != want:
        raise FirmwareError(f"policy bench: exit {res.returncode}, {len(res.stdout)} of {want} "
                            f"bytes: {res.stderr.decode(errors='replace')[-1000:]}")
    raw = np.frombuffer(res.stdout, dtype=np.uint8).reshape(obs.shape[0], rec)
    actions = raw[:, :4 * out_dim].copy().view("<f4").astype(np.float32)
    ticks = raw[:, 4 * out_dim:].copy().view("<u4").reshape(-1).astype(np.int64)
    return PolicyBenchResult(actions, ticks * (1_000_000_000 // SYSCLK_HZ))
