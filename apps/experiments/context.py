"""What a driver is handed besides its settings, and what it hands back."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgerl.apps.experiments.config import ExperimentConfig

__all__ = ["Outcome", "RunContext"]


@dataclass
class RunContext:
    """What a driver knows besides its settings."""

    config: ExperimentConfig
    root: Path
    lane: int | None = None          # a child process running one seed's lane
    argv: list[str] = field(default_factory=list)


@dataclass
class Outcome:
    """What a driver measured: rows per results part ("" = the main file)."""

    parts: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seeds: list[int] = field(default_factory=list)
