"""edgerl's built-in tasks; importing this package registers them (no backend imports)."""

from __future__ import annotations
