"""The fast-loop mode of the HIL (``edgerl hil --mode fast-loop``): the host plans, the MCU
edits.

The host side only runs the planner: every chunk period it takes the newest plant state the
firmware echoed (STATE), plans a chunk (the bundle's ``planner.onnx``, or the LQR-hold planner
for a 1-D action without one) and streams it as a CHUNK, with the planner's intent when it
exports one. The firmware, built with the bundle's
edit policy (:func:`edgerl.export.edit_header.write_edit_header` -> ``src/edit.c``), runs in
``Mode.FAST_LOOP``: at the bundle's control rate, on its own clock, it picks the chunk row
for now, builds the edit observation, runs the edit network, composes and clips the command
and drives the actuators, reporting each tick in EDIT_TICK. HEARTBEATs between chunks keep
the watchdog fed; a dead host still ends in SAFE after the watchdog period. When the
firmware reports SAFE (a host freeze or cable pull tripped the watchdog, the plant state
went stale) the host asks for FAST_LOOP again, as a host loop's next SETPOINT resumes
ACTIVE; an e-stop stays latched.

    host: plant state (STATE) -> planner -> CHUNK ──pty──► MCU: every period: row(now),
                                                                edit obs, net, compose ->
                                                                ACTUATOR, EDIT_TICK ──► host
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.contract.wire import Mode, Msg
from edgerl.hil.firmware import FIRMWARE_DIR, FirmwareConfig, FirmwareError, FirmwareProcess
from edgerl.hil.lqr import LqrHoldPlanner
from edgerl.runtime.serial_transport import SerialTransport

__all__ = ["MODES", "FastLoopController", "fast_loop_firmware"]

log = logging.getLogger(__name__)

#: ``edgerl hil --mode``: the host runs the edit loop and sends setpoints, or the MCU does.
MODES = ("host-loop", "fast-loop")
HEARTBEAT_S = 0.02
RESUME_S = 0.1


def fast_loop_firmware(bundle: Path, cfg: FirmwareConfig, target: str = "host") -> FirmwareProcess:
    """An unstarted firmware process built with ``bundle``'s edit policy for ``target``
    (``host`` or ``qemu-m4``). Builds go to ``firmware/build/fast_loop/<policy hash>/``
    (make skips an unchanged one)."""
    import subprocess

    from edgerl.export.edit_header import write_edit_header

    bundle = Path(bundle)
    digest = hashlib.sha256((bundle / "policy.onnx").read_bytes()
                            + (bundle / "manifest.json").read_bytes()).hexdigest()[:12]
    out = (FIRMWARE_DIR / "build" / "fast_loop" / digest).resolve()
    info = write_edit_header(bundle, out / "include")
    if target == "host":
        exe = out / "edgerl_fw_host_edit"
    elif target == "qemu-m4":
        from edgerl.hil.qemu import qemu_missing

        reason = qemu_missing()
        if reason:
            raise FirmwareError(f"cannot build the Cortex-M4 fast-loop firmware: {reason}")
        exe = out / "edgerl_fw_m4_edit.elf"
    else:
        raise ValueError(f"unknown firmware target {target!r}")
    res = subprocess.run(["make", "--no-print-directory", "-s", "-C", str(FIRMWARE_DIR),
                          f"BUILD={out}", f"M4_BUILD={out}", f"EDIT_H={info.path}", str(exe)],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise FirmwareError(f"building {exe.name} failed:\n{res.stderr[-2000:]}")
    if target == "host":
        return FirmwareProcess(cfg, binary=exe)
    from edgerl.hil.qemu import QemuFirmwareProcess

    return QemuFirmwareProcess(cfg, elf=exe)


class FastLoopController:
    """Host side of the fast loop: the planner thread streaming CHUNKs, heartbeats, and the
    firmware's EDIT_TICK telemetry (:meth:`summary`).

    Args:
        bundle: The edit bundle (the firmware must be built with its edit policy).
        transport: The connected link.
        obs_dim: Plant observation size (the STATE echo is cut to the bundle's).
        gain: LQR gain for the LQR-hold planner (bundles without ``planner.onnx``, 1-D action).
        planner_latency_s: Added to each planner call.
    """

    def __init__(self, bundle: Path, transport: SerialTransport, obs_dim: int,
                 gain: np.ndarray | None = None, planner_latency_s: float = 0.0) -> None:
        from edgerl.runtime.bundle_check import verify_bundle

        # the one gate: closed file set, signature when a key is configured, bounds
        self.spec = spec = verify_bundle(bundle)
        if spec.method != "edit":
            raise ValueError(f"--mode fast-loop needs an edit bundle; {bundle} is "
                             f"{spec.method!r}")
        if spec.observation.dim > obs_dim:
            raise ValueError(f"bundle {bundle}: {spec.observation.dim} observations, the plant "
                             f"has {obs_dim}")
        self.transport = transport
        self.planner = self._planner(Path(bundle), gain, planner_latency_s)
        self.period_s = spec.chunk.period_s
        self.ticks: list[dict[str, Any]] = []
        self.planner_latencies_s: list[float] = []
        self.chunks_sent = 0
        #: SET_MODE FAST_LOOP re-sent while the firmware is IDLE or SAFE (refused at start,
        #: watchdog, stale plant state): as a host loop's next SETPOINT resumes ACTIVE. Never
        #: out of ESTOP.
        self.resumes = 0
        self._replan = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        transport.on_message = self._on_message

    def _planner(self, bundle: Path, gain: np.ndarray | None, latency_s: float) -> Any:
        ch, a_dim = self.spec.chunk, self.spec.action.dim
        if (bundle / "planner.onnx").is_file():
            from edgerl.runtime.planners.local.onnx import onnx_planner

            return onnx_planner(str(bundle / "planner.onnx"), ch.horizon, a_dim, ch.dt_s,
                                ch.period_s, latency_s)
        if gain is None or a_dim != 1:
            raise ValueError(f"bundle {bundle} has no planner.onnx and the plant no LQR expert "
                             "for a 1-D action: nothing can plan its chunks")
        from edgerl.runtime.planners.local.delayed import DelayedPlanner

        planner = LqrHoldPlanner(gain, ch.horizon, ch.dt_s, ch.period_s)
        return DelayedPlanner(planner, latency_s) if latency_s > 0 else planner

    def _on_message(self, msg: Msg, t_host: float) -> None:
        if msg.name != "EDIT_TICK":
            return
        f = msg.fields
        with self._lock:
            self.ticks.append({"t_host": t_host, "fw_time_us": f["fw_time_us"],
                               "tick": f["tick"], "row": f["row"], "has_chunk": f["has_chunk"],
                               "compute_us": f["compute_us"], "chunks_rx": f["chunks_rx"],
                               "chunks_rejected": f["chunks_rejected"],
                               "cmd": f["cmd"][:f["n_cmd"]]})

    def start(self, t0: float) -> None:
        """Ask the firmware for FAST_LOOP once it echoes a plant state, and start planning.
        A refusal (the plant state went stale under load before the switch) is retried by
        the planner thread, as after a fall to SAFE."""
        deadline = time.perf_counter() + 2.0
        while time.perf_counter() < deadline:  # the firmware refuses without a plant state
            st = self.transport.latest_state()
            if st is not None and st.state.shape[0] >= self.spec.observation.dim:
                break
            time.sleep(0.005)
        self.transport.set_mode(Mode.FAST_LOOP)
        try:
            mode = self.transport.request_status(timeout_s=2.0)["mode"]
        except TimeoutError:  # a starved emulator: the planner thread retries
            mode = None
        if mode != Mode.FAST_LOOP:
            log.warning("the firmware did not enter FAST_LOOP (mode %s); retrying while "
                        "planning", mode)
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="hil-fast-loop-planner",
                                        daemon=True)
        self._thread.start()

    def episode_reset(self, t: float) -> None:
        """The plant restarted: plan from its next state at once."""
        self._replan.set()

    def _run(self) -> None:
        obs_dim = self.spec.observation.dim
        next_plan = time.perf_counter()
        last_resume = -1.0
        step = 0
        while not self._stop.is_set():
            now = time.perf_counter()
            st = self.transport.latest_state()
            if st is not None and st.mode in (Mode.IDLE, Mode.SAFE) \
                    and now - last_resume > RESUME_S:
                self.transport.set_mode(Mode.FAST_LOOP)  # refused while no fresh state
                self.resumes += 1
                last_resume = now
            if (now >= next_plan or self._replan.is_set()) and st is not None \
                    and st.state.shape[0] >= obs_dim:
                self._replan.clear()
                chunk = self.planner.plan(st.state[:obs_dim], "", now)
                self.planner_latencies_s.append(time.perf_counter() - st.t_host)
                # step0: this run's chunk counter (the firmware orders chunks by it)
                if self.transport.send_chunk(chunk.actions, chunk.t0, chunk.dt,
                                             chunk.obs_time, step, intent=chunk.intent):
                    self.chunks_sent += 1
                step += 1
                next_plan = now + self.period_s
            else:
                self.transport.heartbeat()
            self._stop.wait(min(HEARTBEAT_S, max(next_plan - time.perf_counter(), 1e-3)))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def summary(self) -> dict[str, Any]:
        """Fast-loop numbers from the firmware's telemetry (its own clock)."""
        with self._lock:
            ticks = list(self.ticks)
        out: dict[str, Any] = {"mode": "fast-loop", "chunks_sent": self.chunks_sent,
                               "edit_ticks": len(ticks), "fast_loop_resumes": self.resumes}
        if len(ticks) < 2:
            return out
        fw_t = np.asarray([t["fw_time_us"] for t in ticks], np.int64)
        gaps = (np.diff(fw_t) & 0xFFFFFFFF).astype(np.float64)
        gaps = gaps[np.diff([t["tick"] for t in ticks]) == 1]  # consecutive ticks only
        comp = np.asarray([t["compute_us"] for t in ticks], np.float64)
        out.update({
            "edit_period_us": round(1e6 / self.spec.control_hz),
            "edit_tick_gap_p50_us": float(np.median(gaps)) if gaps.size else None,
            "edit_tick_gap_max_us": float(gaps.max()) if gaps.size else None,
            "edit_ticks_with_chunk": int(sum(t["has_chunk"] for t in ticks)),
            "edit_compute_p50_us": float(np.median(comp)), "edit_compute_max_us": float(comp.max()),
            "edit_loop_entries": int(sum(t["tick"] == 1 for t in ticks)),
            "fw_chunks_rx": int(ticks[-1]["chunks_rx"]),
            "fw_chunks_rejected": int(ticks[-1]["chunks_rejected"]),
        })
        return out
