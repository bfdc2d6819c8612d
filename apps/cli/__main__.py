"""``python -m edgerl.apps.cli``."""

from edgerl.apps.cli import entry

entry()
