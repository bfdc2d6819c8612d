"""``PlannerClientConfig``: how :class:`~.client.PlannerClient` schedules and supervises its
planner (shared by the client and its planner subprocess, :mod:`.process`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgerl.runtime.cpu_affinity import check_cpus

__all__ = ["PlannerClientConfig"]


@dataclass
class PlannerClientConfig:
    """Scheduling and supervision.

    Attributes:
        mode: ``thread`` or ``process``.
        period_s: Time between requests; ``None`` = the planner's ``info.period_s``.
        instruction: Text passed to every ``plan`` call.
        late_after_s: A call slower than this counts as late; ``None`` =
            ``max(2 * expected_latency_s, period_s)``.
        hang_timeout_s: Process mode: no answer within this -> kill and restart.
        start_timeout_s: Process mode: the child must say hello within this.
        backoff_initial_s / backoff_max_s: Restart / retry backoff (doubles per failure).
        factory_kwargs: Process mode: keyword arguments of the factory (JSON-like values).
        rt_priority: SCHED_FIFO priority of the client thread (0 = normal). In the loop's
            process every thread that takes the GIL should run below the loop's priority but
            above normal threads, so it is never preempted while holding the GIL.
        cpus: CPUs the client thread is pinned to (``()`` = not pinned); in process mode the
            planner process inherits them (it is spawned from this thread). Keep them apart
            from the loop's (``LoopConfig.cpus``), so that the planner's work never lands on
            the loop's CPU while the loop sleeps.
    """

    mode: str = "thread"
    period_s: float | None = None
    instruction: str = ""
    late_after_s: float | None = None
    hang_timeout_s: float = 5.0
    start_timeout_s: float = 60.0
    backoff_initial_s: float = 0.1
    backoff_max_s: float = 5.0
    factory_kwargs: dict[str, Any] = field(default_factory=dict)
    rt_priority: int = 0
    cpus: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        self.cpus = check_cpus(self.cpus, "planner cpus")
        if self.mode not in ("thread", "process"):
            raise ValueError(f"planner mode must be thread or process, got {self.mode!r}")
        if self.period_s is not None and not self.period_s > 0:
            raise ValueError(f"period_s must be > 0, got {self.period_s}")
        if not 0 < self.backoff_initial_s <= self.backoff_max_s:
            raise ValueError("need 0 < backoff_initial_s <= backoff_max_s")
