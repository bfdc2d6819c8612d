"""``SpinThread``: an rclpy executor over some nodes, spun in a background thread (the ROS
tests' in-process graphs)."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["SpinThread"]


class SpinThread:
    """Spin ``nodes`` with a ``SingleThreadedExecutor`` on ``context`` until :meth:`stop`
    (idempotent; also shuts the executor down)."""

    def __init__(self, context: Any, *nodes: Any, timeout_s: float = 0.02) -> None:
        from rclpy.executors import SingleThreadedExecutor

        self.executor = SingleThreadedExecutor(context=context)
        for node in nodes:
            self.executor.add_node(node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, args=(timeout_s,), daemon=True)
        self._thread.start()

    def _spin(self, timeout_s: float) -> None:
        while not self._stop.is_set():
            self.executor.spin_once(timeout_sec=timeout_s)

    def stop(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(5)
            self.executor.shutdown()
