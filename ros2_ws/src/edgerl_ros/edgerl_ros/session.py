"""``MonitorSession``: this process's own node in a graph it starts (``edgerl deploy``,
``edgerl soak``): the graph's ROS environment set here too, a private rclpy context, one
node spun by a background thread, and a teardown that undoes all of it in reverse order.
"""

from __future__ import annotations

import os
import threading
from typing import Any

__all__ = ["ROS_ENV_KEYS", "MonitorSession", "qos_kwargs"]

#: The variables that put this process in the graph's domain (see ``graph_config.ros_env``).
ROS_ENV_KEYS = ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE", "RMW_IMPLEMENTATION")


def qos_kwargs(profile: Any) -> dict[str, Any]:
    """A ``QoSProfile``'s settings as keyword arguments (to copy it with another depth)."""
    return {"reliability": profile.reliability, "history": profile.history,
            "depth": profile.depth, "durability": profile.durability}


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
        self._executor: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
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
        from rclpy.executors import SingleThreadedExecutor

        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self.node)
        context, executor, stop = self.context, self._executor, self._stop

        def spin() -> None:
            while not stop.is_set() and context.ok():
                executor.spin_once(timeout_sec=0.05)

        self._thread = threading.Thread(target=spin, name=self.node_name, daemon=True)
        self._thread.start()

    def stop_spinning(self) -> None:
        """Stop the spin thread (no callback runs after this returns); idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        if self._executor is not None:
            self._executor.shutdown()
            self._executor = None

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
