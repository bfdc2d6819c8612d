"""Helpers of the one-off migration of the legacy results into the experiment store
(``tools/migrate_legacy_results.py``, ``tools/migrate_legacy_docs.py``): the legacy files as git
holds them at the last revision that had them, the commit that added each piece of data, and
the rewriting of the old text (session numbers, issue numbers, machine paths, script paths) into
the store's terms. Run from the repository root.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import Any

#: the last revision holding docs/results*.json, docs/*.jsonl and benchmarks/
LEGACY = "915e233d9f58ef2f8603445e42834e954219216c"
UTC = {**os.environ, "TZ": "UTC"}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                          env=UTC).stdout


def show(path: str) -> str:
    """A legacy file's text at :data:`LEGACY`."""
    return git("show", f"{LEGACY}:{path}")


def load(path: str) -> Any:
    return json.loads(show(path))


def commit_date(sha: str) -> str:
    return git("show", "-s", "--format=%cd", "--date=format-local:%Y-%m-%dT%H:%M:%SZ",
               sha).strip()


def added(path: str) -> tuple[str, str]:
    """(commit, UTC date) that added ``path``'s data (``--follow``: through a rename)."""
    out = git("log", LEGACY, "--follow", "--diff-filter=A", "--format=%H", "--", path).split()
    sha = out[-1]
    return sha, commit_date(sha)


def introduced(text: str, path: str) -> tuple[str, str]:
    """(commit, UTC date) that first put ``text`` into ``path``."""
    out = git("log", LEGACY, "--reverse", "--format=%H", "-S", text, "--", path).split()
    if not out:
        raise SystemExit(f"{path}: no commit introduced {text!r}")
    return out[0], commit_date(out[0])


def blame_lines(path: str) -> list[str]:
    """The commit that added each line of ``path`` at :data:`LEGACY`."""
    shas = []
    for line in git("blame", "--line-porcelain", LEGACY, "--", path).splitlines():
        m = re.match(r"^([0-9a-f]{40}) \d+ \d+", line)
        if m:
            shas.append(m.group(1))
    return shas


def relative(text: str) -> str:
    """Machine paths in a command made relative (a checkout's runs/, a venv's python)."""
    text = re.sub(r"(?<![\w.])(?:/[\w.-]+)+/\.venv/bin/python", ".venv/bin/python", text)
    text = re.sub(r"PYTHONPATH=(?:/[\w.-]+)+/shim:", "PYTHONPATH=", text)
    return re.sub(r"(?<![\w.])(?:/[\w.-]+)+?/(runs|docs|benchmarks)/", r"\1/", text)


def load_range(text: str) -> list[float] | None:
    """The first "load (average) LO-HI" in a text, as [LO, HI]; a single "load X" as [X]."""
    m = re.search(r"load(?: average)?(?: \w+)?\s+(\d+(?:\.\d+)?)\s*(?:-|->|to)\s*(\d+(?:\.\d+)?)",
                  text)
    if m:
        return [float(m.group(1)), float(m.group(2))]
    m = re.search(r"load(?: average)?\s+(?:up to |~)?(\d+(?:\.\d+)?)\b", text)
    return [float(m.group(1))] if m else None
