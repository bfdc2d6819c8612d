"""``python -m edgerl``."""

from edgerl.cli import entry

entry()
