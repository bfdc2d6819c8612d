"""Helpers every verb uses to print results: JSON for machines, a table for people.

They live in :mod:`edgerl.contract.report` (below every layer, so library code prints the same way
without importing the CLI); this module re-exports them for the verbs.
"""

from __future__ import annotations

from edgerl.contract.report import print_json, print_table

__all__ = ["print_json", "print_table"]
