"""How a measured fixed-rate loop is timed and scheduled: the settings the edit loop's bench
(``edgerl bench loop``) and the bare loop beside it (``edgerl bench spin``) share, so both
sides of a ratio run with the same ones."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LoopTiming"]


@dataclass(frozen=True)
class LoopTiming:
    """A loop's rate, measured span and wake-up settings.

    Attributes:
        seconds: Measured duration (s).
        warmup_s: Seconds run before measuring.
        rate_hz: Loop rate (Hz); ``None`` = the bundle manifest's control_hz (edit loop).
        spin_us: Busy-wait this long before each deadline (us).
        switch_interval_us: ``sys.setswitchinterval`` while running (us); 0 leaves it.
        spin_switch_interval_us: The edit loop's ``sys.setswitchinterval`` from each spin's
            start to the tick's end (us; another thread cannot take the GIL inside the
            window); 0 leaves it.
        prewarm_us: The edit loop re-runs its network this long before each deadline to warm
            caches (us); 0 = off.
        rt_priority: SCHED_FIFO priority of the loop thread (0 = normal scheduling).
    """

    seconds: float = 10.0
    warmup_s: float = 1.0
    rate_hz: float | None = None
    spin_us: float = 300.0
    switch_interval_us: float = 200.0
    spin_switch_interval_us: float = 5000.0
    prewarm_us: float = 150.0
    rt_priority: int = 0

    def argv(self) -> list[str]:
        """These settings as ``edgerl bench loop`` flags (``--rate`` only when set)."""
        rate = [] if self.rate_hz is None else ["--rate", f"{self.rate_hz:g}"]
        return [*rate, "--seconds", f"{self.seconds:g}", "--warmup", f"{self.warmup_s:g}",
                "--spin-us", f"{self.spin_us:g}",
                "--switch-interval-us", f"{self.switch_interval_us:g}",
                "--spin-switch-interval-us", f"{self.spin_switch_interval_us:g}",
                "--prewarm-us", f"{self.prewarm_us:g}", "--rt-priority", str(self.rt_priority)]

    @staticmethod
    def interval_s(us: float) -> float | None:
        """A switch interval flag (us) in seconds; ``None`` (leave it alone) for 0."""
        return us * 1e-6 if us > 0 else None
