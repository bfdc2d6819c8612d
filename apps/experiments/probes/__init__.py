"""Measuring programs behind single numbers the docs quote: fuzzers, timing probes, sim and gate
diagnostics, the firmware's M4 figures. Each is a module with a ``main`` run as ``python -m
edgerl.apps.experiments.probes.NAME ...`` (its ``--help`` says what it measures), or through an
experiment config with the ``probe`` driver, which records its JSON output in the store.

They run from a checkout (:data:`CHECKOUT`: the firmware build, ros2_ws, the venv's
interpreter) and print their figures (``print`` is their output, not logging).
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["CHECKOUT", "EDGERL"]

#: the repository checkout these modules were installed from (an editable install)
CHECKOUT = Path(__file__).resolve().parents[3]
#: ``edgerl`` with this interpreter
EDGERL = [sys.executable, "-m", "edgerl.apps"]
