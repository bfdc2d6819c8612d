"""The soak's serial path: ``edgerl hil`` runs back to back (firmware host build on a pty,
the task's LQR expert on the host) with byte corruption, garbage and one cable pull each,
each its own process so a crash is seen as one."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SerialLeg", "SerialTotals"]

log = logging.getLogger(__name__)

#: Cable pull in each HIL run: at this time into the run (s), for this long (s).
UNPLUG_AT_S, UNPLUG_S = 1.5, 0.4
EPISODES = 3


@dataclass
class SerialTotals:
    """Summed over the HIL runs."""

    runs: int = 0
    crashes: int = 0
    crash_logs: list[str] = field(default_factory=list)
    corrupted_executed: int = 0
    estop_ok: int = 0
    estop_failed: int = 0
    estop_skipped: int = 0
    unplugs: int = 0
    unplug_safe_entry_ms: list[float] = field(default_factory=list)
    link_down_ms: list[float] = field(default_factory=list)
    watchdog_trips: int = 0
    bad_frames: int = 0
    setpoints_sent: int = 0
    interrupted: int = 0

    def add(self, out: dict[str, Any]) -> None:
        """Fold one ``edgerl hil --json`` result in."""
        self.runs += 1
        self.corrupted_executed += int(out.get("corrupted_executed") or 0)
        ok = out.get("estop_ok")
        if ok is True:
            self.estop_ok += 1
        elif ok is False:
            self.estop_failed += 1
        else:
            self.estop_skipped += 1
        for u in out.get("unplugs") or []:
            self.unplugs += 1
            if u.get("safe_entry_ms") is not None:
                self.unplug_safe_entry_ms.append(float(u["safe_entry_ms"]))
            if u.get("link_down_ms") is not None:
                self.link_down_ms.append(float(u["link_down_ms"]))
        self.watchdog_trips += int(out.get("watchdog_trips") or 0)
        self.bad_frames += int(out.get("bad_frames") or 0)
        self.setpoints_sent += int(out.get("setpoints_sent") or 0)


class SerialLeg:
    """Runs HIL processes one after another in a thread until :meth:`stop`.

    Args:
        faults: ``--faults`` spec; ``unplug`` and ``seed`` are added per run.
        steps: Control steps of each run (over :data:`EPISODES` episodes).
        rt_priority: ``--rt-priority`` for each run (0: off).
        env: Environment for the child processes.
        timeout_s: A run longer than this is killed and counted as a crash (hung).
    """

    def __init__(self, faults: str, steps: int, rt_priority: int, env: dict[str, str],
                 timeout_s: float = 180.0) -> None:
        self.faults, self.steps, self.rt_priority = faults, steps, rt_priority
        self.env, self.timeout_s = env, timeout_s
        self.totals = SerialTotals()
        self._stop = threading.Event()
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def command(self, i: int) -> list[str]:
        spec = ",".join(s for s in (self.faults, f"unplug={UNPLUG_AT_S}:{UNPLUG_S}",
                                    f"seed={i}") if s)
        # several short episodes: a pole that falls ends one, not the run, so the unplug
        # at UNPLUG_AT_S always happens
        return [sys.executable, "-m", "edgerl.apps", "hil", "--faults", spec, "--episodes",
                str(EPISODES), "--max-steps", str(max(1, self.steps // EPISODES)),
                "--link-probe", "0",
                "--rt-priority", str(self.rt_priority), "--json"]

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="soak-serial", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self._one(i)
            i += 1

    def _one(self, i: int) -> None:
        t0 = time.monotonic()
        proc = subprocess.Popen(self.command(i), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env,
                                stdin=subprocess.DEVNULL)
        self._proc = proc
        try:
            out, err = proc.communicate(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            self._crash(i, f"hung > {self.timeout_s:g} s", err)
            return
        finally:
            self._proc = None
        if self._stop.is_set() and proc.returncode not in (0, 1):  # our SIGINT
            with self.lock:
                self.totals.interrupted += 1
            return
        try:
            result = json.loads(out)
        except json.JSONDecodeError:
            result = None
        if proc.returncode not in (0, 1) or not isinstance(result, dict):
            self._crash(i, f"exit status {proc.returncode}", err)
            return
        with self.lock:
            self.totals.add(result)
        log.debug("hil run %d: %.1f s, rc %d", i, time.monotonic() - t0, proc.returncode)

    def _crash(self, i: int, what: str, err: str) -> None:
        with self.lock:
            self.totals.runs += 1
            self.totals.crashes += 1
            if len(self.totals.crash_logs) < 3:
                self.totals.crash_logs.append(f"run {i}: {what}: {err.strip()[-800:]}")

    def stop(self) -> None:
        """Stop after the current run (interrupting it: it is counted as ``interrupted``)."""
        self._stop.set()
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        if self._thread is not None:
            self._thread.join(timeout=30.0)
            self._thread = None
