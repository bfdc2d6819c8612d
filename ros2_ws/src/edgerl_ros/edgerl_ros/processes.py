"""The graph's node processes: start each node (or a container of composed nodes) with its
log file, check they live, read which load torch, and stop them all (SIGINT, then SIGKILL).
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgerl_ros.executables import CONTAINERS, NODE_MODULES
from edgerl_ros.graph_config import DeployError, to_ros_args

__all__ = ["GraphProcesses", "torch_mapped"]

log = logging.getLogger(__name__)


@dataclass
class GraphProcesses:
    """Child node processes with their log files; :meth:`stop` is idempotent."""

    log_dir: Path
    env: dict[str, str]
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    #: node -> the container process hosting it (composed nodes only)
    hosts: dict[str, str] = field(default_factory=dict)
    stop_timeout_s: float = 5.0

    def start(self, node: str, params: dict[str, Any],
              extra_env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start ``node`` with ``params``; ``extra_env`` adds to the graph's environment for
        this process only (e.g. its real-time priority)."""
        return self._spawn(node, [sys.executable, "-m", NODE_MODULES[node],
                                  *to_ros_args(node, params)], extra_env)

    def start_container(self, name: str, nodes: dict[str, dict[str, Any]],
                        extra_env: dict[str, str] | None = None) -> subprocess.Popen:
        """Start the container ``name`` (:data:`~edgerl_ros.executables.CONTAINERS`) hosting
        ``nodes`` (``{node: params}``), their parameters in a ROS 2 parameter file beside its
        log."""
        import yaml

        params_path = self.log_dir / f"{name}.params.yaml"
        params_path.write_text(yaml.safe_dump(
            {node: {"ros__parameters": values} for node, values in nodes.items()}))
        self.hosts.update({node: name for node in nodes})
        module, hosted = CONTAINERS[name]
        return self._spawn(name, [sys.executable, "-m", module, hosted[0], "--ros-args",
                                  "--params-file", str(params_path)], extra_env)

    def _spawn(self, name: str, cmd: list[str], extra_env: dict[str, str] | None
               ) -> subprocess.Popen:
        """Run ``cmd`` as the process ``name``, its output in ``<log_dir>/<name>.log``."""
        env = self.env if not extra_env else {**self.env, **extra_env}
        with open(self.log_dir / f"{name}.log", "wb") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                    stdin=subprocess.DEVNULL)
        self.procs[name] = proc
        log.debug("started %s (pid %d): %s", name, proc.pid, " ".join(cmd))
        return proc

    def torch_loaded(self) -> dict[str, bool]:
        """Per running node: whether a torch shared library is mapped into its process."""
        return {node: torch_mapped(proc.pid) for node, proc in self.procs.items()
                if proc.poll() is None}

    def check_alive(self) -> None:
        """Raise :class:`DeployError` (with the log tail) if a node has exited."""
        for node, proc in self.procs.items():
            rc = proc.poll()
            if rc is not None:
                raise DeployError(f"{node} exited with status {rc}:\n{self.tail(node)}")

    def tail(self, node: str, n: int = 15) -> str:
        """The last ``n`` lines of ``node``'s log (its container's, when composed)."""
        path = self.log_dir / f"{self.hosts.get(node, node)}.log"
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])

    def stop(self) -> dict[str, int]:
        """SIGINT every child, wait, SIGKILL stragglers; returns exit codes."""
        for proc in reversed(list(self.procs.values())):
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        deadline = time.monotonic() + self.stop_timeout_s
        codes = {}
        for node, proc in self.procs.items():
            try:
                codes[node] = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop on SIGINT; killing it", node)
                proc.kill()
                codes[node] = proc.wait(timeout=5.0)
        return codes


def torch_mapped(pid: int) -> bool:
    """Whether process ``pid`` has torch loaded: a ``torch/`` shared object or ``libtorch``
    in ``/proc/<pid>/maps`` (an imported torch always maps ``torch/_C*.so``).

    Raises:
        DeployError: no ``/proc/<pid>/maps`` (not Linux, or the process is gone).
    """
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError as exc:
        raise DeployError(f"cannot read /proc/{pid}/maps: {exc}") from exc
    return any(("/torch/" in line or "libtorch" in line) and ".so" in line
               for line in maps.splitlines())
