"""Who loads a stored training run as a task's expert: a registry with no heavy imports.

``edgerl.sim`` sits below ``edgerl.policies`` and does not import it. The policies package
registers its run loader here when it is imported (:func:`set_run_loader`), and
:class:`edgerl.sim.adapters.expert.RunExpert` calls whatever is registered
(:func:`run_loader`). Pure Python, so registering costs nothing (``edgerl --help`` runs on an
install without torch).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["run_loader", "set_run_loader"]

#: ``(run_dir, device) -> loaded run`` (``.config.method``, ``.actor``, ``.checkpoint``).
_run_loader: Callable[[Path, str], Any] | None = None


def set_run_loader(loader: Callable[[Path, str], Any]) -> None:
    """Register the function that loads a training run (``edgerl.policies`` does)."""
    global _run_loader
    _run_loader = loader


def run_loader() -> Callable[[Path, str], Any] | None:
    """The registered run loader, ``None`` before one is registered."""
    return _run_loader
