"""User-facing errors shared by every layer.

A library module below the CLI (``edgerl.bench.loop.edit_loop``, a demo stage, ...) that refuses the
user's input raises :class:`UserError`; it may not import ``edgerl.apps.cli`` (see the import
contract in ``tests/test_architecture.py``). ``edgerl.apps.cli.CliError`` is this same class, so
the CLI prints any of them as one ``edgerl VERB: error: ...`` line with exit status 1.
"""

from __future__ import annotations

__all__ = ["UserError"]


class UserError(Exception):
    """A user-facing error: bad flags, a missing file, an unknown task; one line, no traceback."""
