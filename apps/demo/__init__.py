"""``edgerl demo``: the main job, simulator -> trained edit policy -> bundle -> ROS 2 graph ->
firmware-in-the-loop, with one report (see docs/demo.md)."""

from __future__ import annotations

from edgerl.apps.demo.config import DemoConfig, DemoError
from edgerl.apps.demo.pipeline import run_demo

__all__ = ["DemoConfig", "DemoError", "run_demo"]
