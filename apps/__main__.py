"""``python -m edgerl.apps``."""

from edgerl.apps.cli import entry

entry()
