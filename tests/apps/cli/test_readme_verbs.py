"""Every ``edgerl VERB`` the README (and docs/) shows as a command exists in the CLI.

A command is ``edgerl VERB ...`` inside a fenced code block or an inline code span;
``edgerl bench TARGET`` must also name a registered bench target.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from edgerl.apps.cli import VERBS
from edgerl.apps.cli.bench import BENCHES

ROOT = Path(__file__).resolve().parents[3]
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_INLINE = re.compile(r"`([^`\n]+)`")
# not part of a longer word or path (``python -m edgerl.apps`` and ``edgerl.sim`` are not commands)
_COMMAND = re.compile(r"(?<![\w./-])edgerl ([a-z][a-z-]*)(?:[ \t]+([a-z][a-z_-]*))?(?=[\s]|$)")


def commands(markdown: str) -> list[tuple[str, str | None]]:
    """``(verb, next word)`` of every ``edgerl VERB`` in code blocks and inline code."""
    code = [m.group(1) for m in _FENCE.finditer(markdown)]
    rest = _FENCE.sub("", markdown)
    code += [m.group(1) for m in _INLINE.finditer(rest)]
    return [(m.group(1), m.group(2)) for text in code for m in _COMMAND.finditer(text)]


def unknown(markdown: str) -> list[str]:
    """Commands that name no verb of :data:`VERBS` (or no target of :data:`BENCHES`)."""
    out = []
    for verb, arg in commands(markdown):
        if verb not in VERBS:
            out.append(f"edgerl {verb}")
        elif verb == "bench" and arg is not None and arg not in BENCHES:
            out.append(f"edgerl bench {arg}")
    return out


def test_readme_verbs_exist():
    found = commands((ROOT / "README.md").read_text())
    assert len(found) >= 10 and {"train", "export", "deploy"} <= {v for v, _ in found}
    assert unknown((ROOT / "README.md").read_text()) == []


@pytest.mark.parametrize("doc", sorted(p.name for p in (ROOT / "docs").glob("*.md")))
def test_docs_verbs_exist(doc):
    assert unknown((ROOT / "docs" / doc).read_text()) == []


def test_a_missing_verb_is_reported():
    text = ("Run `edgerl frobnicate --fast`, not `python -m edgerl.bench.sim.throughput`.\n\n"
            "```bash\n"
            "edgerl train cartpole && edgerl bench warp --json\nedgerl demo: a table title\n"
            "```\nThe edgerl deploy graph (prose, not code).\n")
    assert commands(text) == [("train", "cartpole"), ("bench", "warp"), ("frobnicate", None)]
    assert unknown(text) == ["edgerl bench warp", "edgerl frobnicate"]
