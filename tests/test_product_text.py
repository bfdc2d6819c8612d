"""The product speaks of the product: its text names no history and no one machine.

README.md, docs/**/*.md, every source file of the product (and of its tests) and the
``--help`` text of ``edgerl`` and of each verb and sub-verb say what holds and how it was
measured. They do not name a numbered work session ("session 14", "sessions 6-8"), an issue
number ("issue #20", "(#22)"), the helper agents that worked on it, or an absolute path into
one machine's checkout or virtual environment (``/work/...``, ``/root/...``,
``/home/<user>/...``, an absolute ``.venv/bin``). The dated chronology lives in docs/LOG.md.

Each pattern below carries text it must match and ordinary text it must leave alone (a C
``#define``, a markdown heading, a CSS colour, a version number, a ``~/.cache`` or ``/etc``
path), so the guard cannot pass by matching nothing.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: What the product's files are: top-level folders and files, README.md, docs/**/*.md.
ROOTS = ("contract", "sim", "runtime", "policies", "export", "hil", "bench", "apps", "ros2_ws",
         "firmware", "tools", "experiments", "benchmarks", "tests", ".ci", "Makefile",
         "pyproject.toml", "setup.py", "README.md", "docs")

#: Text that others are rewriting now; the lead empties this set when that work lands (an entry
#: whose text is already clean fails :func:`test_pending_entries_still_pending`). An entry is a
#: path glob, or ``"PATH#Heading"``: the table rows of that markdown section (heading prefix).
PENDING = {
}

#: The dated chronology: it may name sessions and issues (never a machine's paths).
HISTORY = {"docs/LOG.md"}

#: This file: its cases are the patterns' test data.
SELF = Path(__file__).resolve().relative_to(REPO).as_posix()


@dataclass(frozen=True)
class Rule:
    """One kind of text the product must not hold.

    Attributes:
        name: Short label shown in a failure.
        pattern: Case-insensitive regular expression over one line.
        history: True for history (sessions, issues, agents), which docs/LOG.md may hold.
        hits: Lines it must match (at least one).
        misses: Ordinary lines it must leave alone (at least one).
    """

    name: str
    pattern: str
    history: bool
    hits: tuple[str, ...]
    misses: tuple[str, ...]

    def search(self, line: str) -> re.Match[str] | None:
        """The first match in ``line``, or None."""
        return re.search(self.pattern, line, re.IGNORECASE)


RULES = (
    Rule("numbered session", r"\bsessions?[\s_-]*\d+[a-z]?\b", True,
         hits=("(session 6: argmax of Gaussian scores)", "sessions 6-8", "Session 15b",
               "measured on the session-8 data", "#### Session 11: again"),
         misses=("onnxruntime threads per session", "a recording session.mcap",
                 "ort.InferenceSession(path)", "session_id = 3", "sessions: 2 of them")),
    Rule("issue number", r"\b(?:issues?|pull requests?|PRs?|tickets?)(?:\s*#\s*|-)\d+"
                         r"|\bissues?\s+\d+\b(?!\s+(?!(?:was|has|this|does|its|is|as)\b)[a-z]{2,}s\b)"
                         r"|\(#\d+[),]|(?<![\w&#])#\d+(?='s\b)|(?<![\w&#/])#\d{2}\b(?![0-9a-f])",
         True,
         hits=("issue #22's target 0.75x", "(issue 18)", "before issue 18, 2 of 8",
               "(issue 18 part A)", "issues 17 and 18:", "the issue-18 check", "fixed in (#22)",
               "PR #31",
               "#17's line stays open", "after all #18 branches were merged"),
         misses=("#define EDGERL_WIRE_H 1", "#include <stdint.h>", "## Results", "# 3 seeds",
                 "color: #336699;", "background: #fff", "-serial pty #1 in QEMU",
                 "PKCS#8 PEM", "&#8212;", "version 2.18.0", "the client may issue 4 requests",
                 "issues a SETPOINT 3 times")),
    Rule("helper agent", r"\b(?:helper|sub|coding)[\s-]?agents?\b"
                         r"|\bagents?'?s?\s+(?:jobs?|tests?)\b"
                         r"|\bshared with \w+ (?:other )?agents?\b"
                         r"|\b(?:other|another) (?:helpers?|sessions?)\b", True,
         hits=("load 1.7-3.3 from one helper agent's tests", "a subagent", "sub-agents",
               "(session 5; one other agent's tests running)", "other agents' jobs",
               "2 cores shared with 3 other agents", "other helpers' jobs",
               "decided by other sessions' threads"),
         misses=("multi-agent bicycle-model driving", "policy-controlled agent-steps",
                 "n_agents=4", "agent 0 (ego) is the policy's", "agents_per_env",
                 "tests/helpers/bundles.py", "the other vehicles")),
    Rule("machine path", r"(?<![\w.~/$-])/(?:work|root)/"
                         r"|(?<![\w.~/$-])/(?:home|Users)/[a-z_][\w.-]*/"
                         r"|(?<![\w.~$-])/(?:[\w.+-]+/)*\.venv[\w-]*/bin\b", False,
         hits=("cd /work/main && make", "/root/.pyenv/versions/3.10.13/bin/python3.10",
               "PYTHONPATH=/home/alice/edgerl", "/opt/edgerl/.venv/bin/python -m pytest",
               "/srv/ci/.venv-mjlab/bin/edgerl"),
         misses=("~/.cache/edgerl/bundles", "/etc/security/limits.conf", "/dev/ttyUSB0",
                 ".venv/bin/python -m pytest", "$(VENV)/bin/python", "./.venv/bin/edgerl",
                 "$REPO/.venv/bin/ruff", "https://example.org/work/x", "/tmp/dt4",
                 "/home/<user>/ is yours", "#!/usr/bin/env python3")),
)


@dataclass(frozen=True)
class Hit:
    """One line that names history or a machine path."""

    where: str
    line: int
    rule: str
    text: str

    def __str__(self) -> str:
        return f"{self.where}:{self.line}: {self.rule}: {self.text.strip()[:160]}"


def _tracked(roots: tuple[str, ...]) -> list[str]:
    """Repo-relative paths under ``roots``: tracked, or untracked and not ignored (git)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", *roots],
            cwd=REPO, check=True, capture_output=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("product text: not a git checkout")
    return sorted({p for p in out.decode().split("\0") if p and (REPO / p).is_file()})


def product_files() -> list[str]:
    """The files whose text is the product's: sources, README.md and docs/**/*.md."""
    files = _tracked(ROOTS)
    return [p for p in files
            if p != SELF and (not p.startswith("docs/") or p.endswith(".md"))]


def _read_text(path: str) -> str | None:
    """The file's text, or None for a binary file."""
    data = (REPO / path).read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _pending_rows(path: str, lines: list[str]) -> set[int]:
    """Line numbers (1-based) of ``path`` that a ``PATH#Heading`` PENDING entry covers."""
    covered: set[int] = set()
    for entry in PENDING:
        entry_path, _, heading = entry.partition("#")
        if entry_path != path or not heading:
            continue
        inside = False
        for no, line in enumerate(lines, 1):
            if line.startswith("#"):
                inside = line.lstrip("#").strip().startswith(heading)
            elif inside and line.startswith("|"):
                covered.add(no)
    return covered


def _pending_path(path: str) -> bool:
    """True where a whole-file PENDING glob covers ``path``."""
    return any("#" not in e and fnmatch.fnmatch(path, e) for e in PENDING)


def text_hits(where: str, text: str, *, history: bool = True,
              skip: set[int] | frozenset[int] = frozenset()) -> Iterator[Hit]:
    """Every line of ``text`` that a rule matches; ``history=False`` checks paths only."""
    for no, line in enumerate(text.splitlines(), 1):
        if no in skip:
            continue
        for rule in RULES:
            if (history or not rule.history) and rule.search(line):
                yield Hit(where, no, rule.name, line)


def file_hits(path: str, *, pending: bool = False) -> list[Hit]:
    """The hits in one file; ``pending=True`` checks only what PENDING covers in it."""
    text = _read_text(path)
    if text is None:
        return []
    lines = text.splitlines()
    rows = _pending_rows(path, lines)
    if pending:
        if _pending_path(path):
            return list(text_hits(path, text))
        others = set(range(1, len(lines) + 1)) - rows
        return list(text_hits(path, text, skip=others))
    if _pending_path(path):
        return []
    return list(text_hits(path, text, history=path not in HISTORY, skip=rows))


def help_texts() -> Iterator[tuple[str, str]]:
    """(command, --help text) for ``edgerl`` and every verb and sub-verb."""
    from edgerl.apps.cli import build_parser

    def walk(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, str]]:
        yield name, parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for verb, sub in action.choices.items():
                    yield from walk(sub, f"{name} {verb}")

    yield from walk(build_parser(), "edgerl")


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_rule_matches_its_cases(rule: Rule) -> None:
    assert rule.hits and rule.misses
    assert [t for t in rule.hits if not rule.search(t)] == []


@pytest.mark.parametrize("rule", RULES, ids=[r.name for r in RULES])
def test_rule_leaves_ordinary_text(rule: Rule) -> None:
    assert [t for t in rule.misses if rule.search(t)] == []


def test_pending_table_rows_are_skipped(monkeypatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "PENDING", {"README.md#What it measures"})
    lines = ["# T", "## What it measures (2 cores)", "| a | session 3 |", "prose", "## Next",
             "| b | c |"]
    assert _pending_rows("README.md", lines) == {3}
    assert _pending_rows("docs/ros2.md", lines) == set()


def test_history_file_may_name_sessions_not_paths() -> None:
    text = "2026-12-01: session 14 fixed issue #20\nran from /work/main\n"
    assert [h.rule for h in text_hits("docs/LOG.md", text, history=False)] == ["machine path"]


def test_product_files_found() -> None:
    files = product_files()
    assert "README.md" in files and "setup.py" in files
    assert any(p.startswith("docs/") for p in files)
    assert not any(p.startswith("docs/") and not p.endswith(".md") for p in files)
    assert SELF not in files


def test_product_files_name_no_history_and_no_machine() -> None:
    hits = [str(h) for p in product_files() for h in file_hits(p)]
    assert hits == [], "product text names history or a machine path:\n" + "\n".join(hits)


def test_help_texts_name_no_history_and_no_machine() -> None:
    texts = dict(help_texts())
    assert "edgerl" in texts and "edgerl bench" in texts and len(texts) > 20
    hits = [str(h) for name, text in texts.items() for h in text_hits(f"`{name} --help`", text)]
    assert hits == [], "--help names history or a machine path:\n" + "\n".join(hits)


def test_pending_entries_still_pending() -> None:
    files = product_files()
    stale = [e for e in sorted(PENDING)
             if not any(file_hits(p, pending=True) for p in files
                        if fnmatch.fnmatch(p, e.partition("#")[0]))]
    assert stale == [], f"PENDING entries whose text is clean now (remove them): {stale}"
