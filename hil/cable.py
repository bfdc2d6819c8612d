"""Link state for the HIL run's cable pulls: when each pull started, when the link was up
again, and how long the firmware took to reach its safe state (docs/firmware.md, HIL).

:class:`Cable` acts a pull out in a thread (close the port, wait, re-open and re-handshake)
and records an :class:`Unplug` per pull. The harness waits for the link
(:meth:`Cable.wait_linked`) before anything that needs it, such as the e-stop self-test, so
a cable still out is reported as link-down, never as a failed e-stop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edgerl.contract.wire import Mode

__all__ = ["DRIVING_MODES", "Cable", "Unplug", "unplug_report"]

log = logging.getLogger(__name__)

FW_CLOCK_WRAP_US = 1 << 32  # the firmware's fw_time_us is a wrapping uint32
#: Modes in which the firmware drives the actuators for the host: host setpoints (ACTIVE,
#: the host loop), or its own policy fed by host heartbeats or chunks (LOCAL_POLICY, and
#: FAST_LOOP, the fast loop). A pull's safe entry is timed from the last output in one.
DRIVING_MODES = (Mode.ACTIVE, Mode.LOCAL_POLICY, Mode.FAST_LOOP)


@dataclass
class Unplug:
    """One cable pull (host ``time.perf_counter()`` seconds).

    Attributes:
        t_pull: When the port was closed.
        hold_s: How long the cable stayed out (requested).
        t_linked: When the re-plug's handshake completed (NaN: never).
        error: Why the re-plug failed ("" when it did not).
    """

    t_pull: float
    hold_s: float
    t_linked: float = float("nan")
    error: str = ""

    @property
    def link_down_ms(self) -> float | None:
        """Pull -> link up again (ms, host clock); None while down or if re-plug failed."""
        if self.t_linked != self.t_linked:
            return None
        return round((self.t_linked - self.t_pull) * 1e3, 3)


class Cable:
    """Pulls and re-plugs a :class:`~edgerl.runtime.serial_transport.SerialTransport`."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.unplugs: list[Unplug] = []
        self._threads: list[threading.Thread] = []

    def pull(self, seconds: float) -> Unplug:
        """Pull the cable now and re-plug it ``seconds`` later, in a thread."""
        ev = Unplug(time.perf_counter(), seconds)
        self.unplugs.append(ev)
        self.transport.unplug()
        t = threading.Thread(target=self._replug, args=(ev,), name="hil-cable", daemon=True)
        self._threads.append(t)
        t.start()
        return ev

    def _replug(self, ev: Unplug) -> None:
        time.sleep(ev.hold_s)
        try:
            self.transport.replug()
            ev.t_linked = time.perf_counter()
        except (ConnectionError, TimeoutError, OSError) as exc:
            ev.error = str(exc)
            log.warning("re-plug failed: %s", exc)

    def wait_linked(self, timeout_s: float) -> bool:
        """Wait (at most ``timeout_s``) for pending re-plugs to finish; True if linked."""
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        while not self.transport.connected and time.monotonic() < deadline:
            time.sleep(0.01)
        return bool(self.transport.connected)


def _fw_delta_us(later: int, earlier: int) -> int:
    return (int(later) - int(earlier)) % FW_CLOCK_WRAP_US


def unplug_report(unplugs: Sequence[Unplug], history: Sequence[Any]) -> list[dict[str, Any]]:
    """Per pull: ``link_down_ms`` (host clock) and the safe entry: ``safe_entry_ms`` on the
    firmware's clock, from its last driving output before the pull (ACTIVE in the host loop,
    FAST_LOOP in the fast loop: :data:`DRIVING_MODES`) to its first SAFE/ESTOP output after
    it (the watchdog's reaction; resolution: one plant step), and
    ``safe_entry_host_ms`` from the pull to that output's arrival (host clock, with pipe
    latency). ``history`` is the firmware's ACTUATOR samples (``t_host``, ``fw_time_us``,
    ``mode``) in order; None where no safe output was seen before the link came back."""
    out = []
    safe_modes = (Mode.SAFE, Mode.ESTOP)
    for ev in unplugs:
        end = ev.t_linked if ev.t_linked == ev.t_linked else float("inf")
        before = [a for a in history if a.t_host <= ev.t_pull and a.mode in DRIVING_MODES]
        safe = next((a for a in history if ev.t_pull < a.t_host <= end + 0.05
                     and a.mode in safe_modes), None)
        row: dict[str, Any] = {"hold_s": ev.hold_s, "link_down_ms": ev.link_down_ms,
                               "safe_entry_ms": None, "safe_entry_host_ms": None}
        if safe is not None:
            row["safe_entry_host_ms"] = round((safe.t_host - ev.t_pull) * 1e3, 3)
            if before:
                row["safe_entry_ms"] = round(
                    _fw_delta_us(safe.fw_time_us, before[-1].fw_time_us) / 1e3, 3)
        if ev.error:
            row["replug_error"] = ev.error
        out.append(row)
    return out
