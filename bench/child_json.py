"""Run ``python -m edgerl.apps ARGV --json`` in a child process and read its JSON.

Benchmarks that compare paths measured by other ``edgerl`` commands (``edgerl bench ratios``'
ros2 rows, :mod:`edgerl.bench.hil.rt_ratio`) run each in its own process, so that one's threads,
real-time priority or rclpy context never leak into the next.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

__all__ = ["edgerl_json"]


def edgerl_json(argv: list[str], ok_codes: tuple[int, ...] = (0,),
                timeout: float = 600.0) -> dict[str, Any]:
    """``python -m edgerl.apps ARGV --json``'s printed JSON. ``RuntimeError`` naming the command,
    its exit code and the end of its stderr when it exits with a code not in ``ok_codes``."""
    proc = subprocess.run([sys.executable, "-m", "edgerl.apps", *argv, "--json"],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode not in ok_codes:
        raise RuntimeError(f"edgerl {' '.join(argv)} exited {proc.returncode}: "
                           f"{proc.stderr.strip()[-1500:]}")
    return json.loads(proc.stdout)
