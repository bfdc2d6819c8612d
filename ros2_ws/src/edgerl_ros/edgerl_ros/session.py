"""``MonitorSession``: this process's own node in a graph it starts (``edgerl deploy``,
``edgerl soak``): the graph's ROS environment set here too, a private rclpy context, one
node spun by a background thread, and a teardown that undoes all of it in reverse order.
"""

from __future__ import annotations

import os
import threading
from typing import Any

__all__ = ["ROS_ENV_KEYS", "MonitorSession", "SpinThread", "qos_kwargs"]

#: The variables that put this process in the graph's domain (see ``graph_config.ros_env``).
ROS_ENV_KEYS = ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE", "RMW_IMPLEMENTATION")


def qos_kwargs(profile: Any) -> dict[str, Any]:
    """A ``QoSProfile``'s settings as keyword arguments (to copy it with another depth)."""
    return {"reliability": profile.reliability, "history": profile.history,
            "depth": profile.depth, "durability": profile.durability}


class SpinThread:
    """Spin ``nodes`` with a ``SingleThreadedExecutor`` on ``context`` in a daemon thread
    until :meth:`stop` (idempotent; no callback runs after it returns, and the executor is
    shut down)."""

    def __init__(self, context: Any, *nodes: Any, timeout_s: float = 0.05,
                 name: str = "spin") -> None:
        from rclpy.executors import SingleThreadedExecutor

        self.executor = SingleThreadedExecutor(context=context)
        for node in nodes:
            self.executor.add_node(node)
        self._context = context
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, args=(timeout_s,), name=name,
                                        daemon=True)
        self._thread.start()

    def _spin(self, timeout_s: float) -> None:
        while not self._stop.is_set() and self._context.ok():
            self.executor.spin_once(timeout_sec=timeout_s)

    def stop(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(timeout=5.0)
            self.executor.shutdown()


class MonitorSession:
    """Context manager: ``with MonitorSession(env, "edgerl_deploy_monitor") as s:`` gives
    ``s.node`` (create subscriptions on it, then call :meth:`spin`); on exit the spin thread
    stops, the executor, node and context go, and ``os.environ`` is restored.

    Args:
        env: The graph's environment (:data:`ROS_ENV_KEYS` are applied to this process).
        node_name: Name of this process's node.
    """

    def __init__(self, env: dict[str, str], node_name: str) -> None:
        self.env, self.node_name = env, node_name
        self.context: Any = None
        self.node: Any = None
        self._spin: SpinThread | None = None
        self._saved: dict[str, str | None] = {}

    def __enter__(self) -> MonitorSession:
        import rclpy

        self._saved = {k: os.environ.get(k) for k in ROS_ENV_KEYS}
        os.environ.update({k: self.env[k] for k in ROS_ENV_KEYS})
        try:
            self.context = rclpy.Context()
            rclpy.init(context=self.context)
            self.node = rclpy.create_node(self.node_name, context=self.context)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def spin(self) -> None:
        """Start spinning the node in a daemon thread (after its entities are created)."""
        self._spin = SpinThread(self.context, self.node, name=self.node_name)

    def stop_spinning(self) -> None:
        """Stop the spin thread (no callback runs after this returns); idempotent."""
        if self._spin is not None:
            self._spin.stop()

    def __exit__(self, *exc: Any) -> None:
        self.stop_spinning()
        if self.node is not None:
            self.node.destroy_node()
        if self.context is not None:
            self.context.try_shutdown()
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
