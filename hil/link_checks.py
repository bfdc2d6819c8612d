"""Self-tests of a live HIL link: the e-stop sequence and the bare setpoint round trip.

Both run on an open :class:`~edgerl.runtime.serial_transport.SerialTransport` to a running
firmware (host build on a pty or the QEMU board) and measure or check the firmware's own
behaviour, not the control loop's: ``edgerl hil`` runs them around its episodes, and
:func:`after_episodes` is its sequence once the episodes are over.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgerl.contract.wire import Mode
from edgerl.hil.cable import Cable
from edgerl.hil.firmware import FirmwareProcess
from edgerl.runtime.serial_transport import SerialTransport, TransportStats

__all__ = ["LinkReport", "after_episodes", "estop_check", "link_probe", "safe_entry_ms"]


def safe_entry_ms(fw: FirmwareProcess, transport: SerialTransport,
                  freezes: list[tuple[float, float]]) -> list[float]:
    """Per host freeze ``(start, end)`` (host ``perf_counter`` s): ms from sending the last
    setpoint the firmware applied before it to the firmware's first SAFE output (host clock;
    includes pty and pipe latency). Freezes without both are left out."""
    out = []
    sent = transport.sent_times()
    acked = sorted(s for s in transport.acked_setpoints() if s in sent)
    for start, end in freezes:
        before = [sent[s] for s in acked if sent[s] <= start]
        safe = [a.t_host for a in fw.history if start <= a.t_host <= end and a.mode == Mode.SAFE]
        if before and safe:
            out.append(round((safe[0] - before[-1]) * 1e3, 3))
    return out


def estop_check(fw: FirmwareProcess, transport: SerialTransport, n_cmd: int,
                timeout_s: float = 1.0) -> dict[str, bool]:
    """E-stop self-test on a live link: latch -> zero output; cable pull + re-plug -> still
    latched, setpoints rejected; clear -> SAFE; valid setpoint -> ACTIVE. Each step's result
    by name (all True = ``estop_ok``)."""
    res: dict[str, bool] = {}
    transport.send_setpoint(np.full(n_cmd, 0.25, np.float32))
    transport.estop()
    s = fw.wait_actuator(lambda a: a.mode == Mode.ESTOP, timeout_s)
    res["latched_zero_output"] = s is not None and bool(np.all(s.cmd == 0.0))
    transport.unplug()
    time.sleep(0.05)
    hello = transport.replug()
    res["latched_across_reconnect"] = hello.mode == Mode.ESTOP
    before = transport.request_status(timeout_s=timeout_s)["setpoints_rejected"]
    transport.send_setpoint(np.full(n_cmd, 0.5, np.float32))
    status = transport.request_status(timeout_s=timeout_s)
    res["setpoint_rejected"] = (status["setpoints_rejected"] == before + 1
                                and status["mode"] == Mode.ESTOP
                                and fw.actuator is not None
                                and bool(np.all(fw.actuator.cmd == 0.0)))
    transport.clear_estop()
    s = fw.wait_actuator(lambda a: a.mode == Mode.SAFE, timeout_s)
    res["cleared_to_safe"] = s is not None
    transport.send_setpoint(np.full(n_cmd, 0.125, np.float32))
    s = fw.wait_actuator(lambda a: a.mode == Mode.ACTIVE, timeout_s)
    res["resumed_on_setpoint"] = s is not None and bool(np.allclose(s.cmd, 0.125))
    return res


def link_probe(transport: SerialTransport, n_cmd: int, count: int) -> dict[str, float]:
    """``count`` zero setpoints, each waited for (its STATE echo) before the next: the link's
    own round trip (host clock, µs) without the control loop's load. Empty for 0."""
    rtts = []
    for _ in range(count):
        seq = transport.send_setpoint(np.zeros(n_cmd, np.float32))
        s = transport.wait_state(seq, 0.5)
        if seq > 0 and s is not None and s.setpoint_seq == seq:
            rtts.append((s.t_host - transport.sent_times()[seq]) * 1e6)
    if not rtts:
        return {}
    r = np.asarray(rtts)
    return {"link_rtt_samples": int(r.size), "link_rtt_p50_us": float(np.percentile(r, 50)),
            "link_rtt_p99_us": float(np.percentile(r, 99))}


@dataclass
class LinkReport:
    """The link once the episodes are over.

    Attributes:
        linked: Whether the link was up (a pulled cable back) within the wait; when it was
            not, the firmware's counts and the self-tests are empty, not failures.
        reconnects: Re-plugs during the episodes.
        loop_status, loop_stats: The firmware's STATUS and the host's counts at the
            episodes' end (every echo of an episode setpoint has arrived once the STATUS has:
            the firmware answers in order).
        probe: :func:`link_probe`'s round trips. estop: :func:`estop_check`'s steps.
        status, stats: The firmware's STATUS and the host's counts after the self-tests.
    """

    linked: bool
    reconnects: int
    loop_status: dict[str, Any]
    loop_stats: TransportStats
    probe: dict[str, float]
    estop: dict[str, bool]
    status: dict[str, Any]
    stats: TransportStats


def after_episodes(fw: FirmwareProcess, transport: SerialTransport, cable: Cable, n_cmd: int,
                   *, link_wait_s: float, probe_count: int, check_estop: bool) -> LinkReport:
    """The checks after the episodes (link faults already lifted): wait up to
    ``link_wait_s`` for a cable pulled near the end, note the episodes' counts, then the
    round-trip probe (``probe_count`` setpoints) and the e-stop self-test (``check_estop``)
    on the same link, and the counts after them."""
    linked = cable.wait_linked(link_wait_s)
    reconnects = transport.connects - 1  # before the e-stop self-test's re-plug
    loop_status = transport.request_status(timeout_s=2.0) if linked else {}
    loop_stats = transport.stats()
    time.sleep(0.05)
    probe = link_probe(transport, n_cmd, probe_count) if linked else {}
    estop = estop_check(fw, transport, n_cmd) if check_estop and linked else {}
    status = transport.request_status(timeout_s=2.0) if linked else {}
    return LinkReport(linked, reconnects, loop_status, loop_stats, probe, estop, status,
                      transport.stats())
