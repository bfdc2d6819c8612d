"""``WorkerThread``: the daemon thread a planner client runs its loop in, with the stop and
wake events the loop waits on (shared by :class:`~.client.PlannerClient` and
:class:`~.gated.GatedPlannerClient`)."""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["WorkerThread"]


class WorkerThread:
    """One named daemon thread running ``target``.

    Attributes:
        stopping: Set by :meth:`stop`; the loop exits when it sees it.
        wake: Set to cut the loop's current wait short (also set by :meth:`stop`).
    """

    def __init__(self, name: str, target: Callable[[], None]) -> None:
        self.name, self.target = name, target
        self.stopping = threading.Event()
        self.wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread; ``RuntimeError`` when it is already running."""
        if self._thread is not None:
            raise RuntimeError(f"{self.name} already running")
        self.stopping.clear()
        self._thread = threading.Thread(target=self.target, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the loop to stop and wait up to ``timeout`` s for it (idempotent)."""
        self.stopping.set()
        self.wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
