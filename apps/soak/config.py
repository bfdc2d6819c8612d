"""What one soak run does (``edgerl soak`` flags map 1:1 onto :class:`SoakConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["SoakConfig", "SoakError"]


class SoakError(RuntimeError):
    """The soak could not be started (bad bundle or option, no ROS 2); the message says why."""


@dataclass
class SoakConfig:
    """One soak run.

    Attributes:
        bundle: Exported bundle the ROS 2 graph (sim robot + planner + edit node) deploys.
        minutes: Length of the run after the first command (minutes).
        rate_hz: Robot and edit-loop rate (Hz), overriding the manifest's ``control_hz``.
        rt_priority: SCHED_FIFO priority for the edit node (the sim robot one lower), the
            soak's own threads and the HIL harness; 0: off. Where not permitted the run goes
            on without it and the report says so (``rt_applied``).
        kill_every_s: SIGKILL the planner process this often and start a new one (s; 0: never).
        bad_hz: Bad messages injected per second, rotating over every topic and kind.
        serial: Run the serial HIL path (firmware host build on a pty) beside the graph,
            one short ``edgerl hil`` episode after another with corruption and an unplug each.
        serial_faults: ``edgerl hil --faults`` spec for each HIL run (``unplug`` is added).
        serial_steps: Control steps per HIL run.
        sample_every_s: RSS sampling period (s).
        rearm_after_s: The operator: once the edit node has reported e-stop for this long,
            publish a re-arm on ``robot/estop_reset`` (and again every ``rearm_after_s`` while
            it stays latched); 0: never (the latch then holds for the rest of the run).
        domain_id: ROS_DOMAIN_ID (None: random in 1..200).
        log_dir: Keep the node logs here (None: a temporary directory, removed when clean).
    """

    bundle: Path
    minutes: float = 30.0
    rate_hz: float = 500.0
    rt_priority: int = 50
    kill_every_s: float = 60.0
    bad_hz: float = 20.0
    serial: bool = True
    serial_faults: str = "corrupt=0.005,corrupt_rx=0.001,garbage=2"
    serial_steps: int = 300
    sample_every_s: float = 1.0
    rearm_after_s: float = 5.0
    domain_id: int | None = None
    log_dir: Path | None = None

    def check(self) -> None:
        """Raise :class:`SoakError` naming the first bad field."""
        if not self.minutes > 0:
            raise SoakError(f"--minutes must be > 0, got {self.minutes}")
        if not 1.0 <= self.rate_hz <= 2000.0:
            raise SoakError(f"--rate-hz must be in 1..2000, got {self.rate_hz}")
        if not 0 <= self.rt_priority <= 98:
            raise SoakError(f"--rt-priority must be in 0..98 (0: off), got {self.rt_priority}")
        if self.kill_every_s < 0:
            raise SoakError(f"--kill-every must be >= 0, got {self.kill_every_s}")
        if self.rearm_after_s < 0:
            raise SoakError(f"--rearm-after must be >= 0, got {self.rearm_after_s}")
        if self.bad_hz < 0:
            raise SoakError(f"--bad-hz must be >= 0, got {self.bad_hz}")
        if self.serial_steps < 10:
            raise SoakError(f"--serial-steps must be >= 10, got {self.serial_steps}")
        if self.domain_id is not None and not 0 <= self.domain_id <= 232:
            raise SoakError(f"--domain-id must be in 0..232, got {self.domain_id}")
        if not (Path(self.bundle) / "manifest.json").is_file():
            raise SoakError(f"--bundle {self.bundle}: no manifest.json there")
