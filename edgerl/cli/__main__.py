"""``python -m edgerl.cli``."""

from edgerl.cli import entry

entry()
