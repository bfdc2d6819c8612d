"""``edgerl soak``: the deploy graph and the serial HIL path under faults for minutes, checked
for unsafe commands, crashes, memory growth and refused bad input."""

from __future__ import annotations

from edgerl.apps.soak.config import SoakConfig, SoakError

__all__ = ["SoakConfig", "SoakError"]
