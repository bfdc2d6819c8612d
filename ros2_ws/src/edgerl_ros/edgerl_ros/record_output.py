"""Refusing, before anything starts, a recording's output file that cannot (or must not) be
written: ``edgerl record`` and the edit node's transition recording share the check.
"""

from __future__ import annotations

import os
from pathlib import Path

from edgerl.contract.errors import UserError

__all__ = ["RecordError", "check_output"]


class RecordError(UserError, ValueError):
    """The recording cannot be made (the message names the path or the domain)."""


def check_output(path: Path, force: bool) -> None:
    """Refuse, before anything starts, an output the recorder could not (or must not) write:
    a directory, an existing file without ``force``, a parent that is a file or not writable.

    Raises:
        RecordError: naming the path and the reason.
    """
    if path.is_dir():
        raise RecordError(f"{path}: is a directory; give a .mcap file path")
    if path.exists() and not force:
        raise RecordError(f"{path}: exists; pass --force to overwrite it")
    if path.exists() and not os.access(path, os.W_OK):
        raise RecordError(f"{path}: exists and is not writable")
    anc = path.parent
    while not anc.exists() and anc != anc.parent:  # the directories it would create
        anc = anc.parent
    if not anc.is_dir():
        raise RecordError(f"{path}: cannot create it, {anc} is not a directory")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise RecordError(f"{path}: cannot create it, no write permission in {anc}")
