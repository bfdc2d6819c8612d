"""``LoopConfig``: the edit loop's scheduler and per-tick options (validated at build)."""

from __future__ import annotations

from dataclasses import dataclass, field

from edgerl.contract.timing import TRIGGERS
from edgerl.runtime.safety import SafetyConfig

__all__ = ["LoopConfig"]


@dataclass
class LoopConfig:
    """Scheduler and per-tick options.

    Attributes:
        rate_hz: Loop rate; ``None`` = the manifest's ``control_hz``.
        spin_s: Busy-wait the last ``spin_s`` before each deadline (s).
        row_mode: ``hold`` (the row whose interval contains ``t``) or ``interpolate``
            (linear between it and the next row; for loops faster than the chunk's dt).
        gc_freeze: ``gc.collect(); gc.freeze()`` at start so collections stay short.
        switch_interval_s: ``sys.setswitchinterval`` while running (process-wide; restored
            at stop): how long another Python thread may hold the GIL before the loop gets
            it. ``None`` leaves it alone.
        spin_switch_interval_s: ``sys.setswitchinterval`` from the start of each spin to
            the end of its tick, then back (``switch_interval_s``) for the sleep: a thread
            that wants the GIL while the loop spins (the planner client, back from a C call)
            waits until the loop sleeps instead of forcing a GIL hand-over inside the spin
            window (a hand-over costs the loop a futex wake-up: tens of us late here). The
            loop's own wait for the GIL when it wakes stays bounded by ``switch_interval_s``,
            which is below ``spin_s``. ``None`` leaves the interval alone.
        rt_priority: ``SCHED_FIFO`` priority (1-99) of the loop thread (Linux; needs
            CAP_SYS_NICE or root); 0 = normal scheduling. If refused, a warning is logged
            and the loop runs normally.
        cpus: CPUs the loop thread is pinned to (``()`` = not pinned): keep the planner
            (``PlannerClientConfig.cpus``) off them (:mod:`edgerl.runtime.cpu_affinity`).
            A CPU this process may not use is refused at :meth:`LoopScheduler.start`.
        prewarm_s: Time budgeted, before the spin window (``spin_s + prewarm_s`` before each
            deadline), to re-run the network on its last input and the edit-observation
            builder into a scratch buffer, so weights and code are in cache when the tick
            starts (other processes evict them while the loop sleeps). Its run time is
            absorbed by the spin, so it never delays the tick; skipped when the loop woke
            inside the spin window, and for recurrent backends; 0 disables it.
        metrics_capacity: Ticks kept for percentiles.
        safety: Fallback policies and latch thresholds.
        trigger: ``clock`` (fixed-rate grid), ``state`` (tick on each new observation, with
            a clock tick after the timing's ``trigger_timeout_s`` without one), or ``""``:
            the manifest's ``timing.trigger`` (what training modelled).
    """

    rate_hz: float | None = None
    spin_s: float = 300e-6
    row_mode: str = "hold"
    gc_freeze: bool = True
    switch_interval_s: float | None = 2e-4
    spin_switch_interval_s: float | None = 5e-3
    rt_priority: int = 0
    cpus: tuple[int, ...] = ()
    prewarm_s: float = 150e-6
    metrics_capacity: int = 1 << 16
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    trigger: str = ""

    def __post_init__(self) -> None:
        if self.trigger not in ("", *TRIGGERS):
            raise ValueError(f"trigger must be clock or state (or empty: the manifest's), got "
                             f"{self.trigger!r}")
        if self.row_mode not in ("hold", "interpolate"):
            raise ValueError(f"row_mode must be hold or interpolate, got {self.row_mode!r}")
        if self.rate_hz is not None and not self.rate_hz > 0:
            raise ValueError(f"rate_hz must be > 0, got {self.rate_hz}")
        if self.spin_s < 0:
            raise ValueError("spin_s must be >= 0")
        if self.spin_switch_interval_s is not None and not self.spin_switch_interval_s > 0:
            raise ValueError(f"spin_switch_interval_s must be > 0 (or None), got "
                             f"{self.spin_switch_interval_s}")
        if self.prewarm_s < 0:
            raise ValueError("prewarm_s must be >= 0")
        if not 0 <= self.rt_priority <= 99:
            raise ValueError(f"rt_priority must be 0..99, got {self.rt_priority}")
        self.cpus = tuple(sorted({int(c) for c in self.cpus}))
        if any(c < 0 for c in self.cpus):
            raise ValueError(f"cpus must be CPU numbers >= 0, got {list(self.cpus)}")
