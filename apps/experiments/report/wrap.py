"""Markdown prose wrapped at 100 columns; tables, headings, code and comments left as they are."""

from __future__ import annotations

import re
import textwrap

__all__ = ["wrap_markdown"]

WIDTH = 100
_KEEP = ("|", "#", "<!--", "    ", "![")
_ITEM = re.compile(r"^(\s*(?:[-*]|\d+\.)\s+)")


def wrap_markdown(text: str, width: int = WIDTH) -> str:
    """``text`` with every prose line longer than ``width`` wrapped (a list item's continuation
    indented under its text); nothing inside a code fence changes."""
    out: list[str] = []
    fenced = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append(line)
            continue
        if fenced or len(line) <= width or line.startswith(_KEEP):
            out.append(line)
            continue
        m = _ITEM.match(line)
        lead = m.group(1) if m else re.match(r"^\s*", line).group(0)
        out.append(textwrap.fill(line[len(lead):], width=width, initial_indent=lead,
                                 subsequent_indent=" " * len(lead), break_long_words=False,
                                 break_on_hyphens=False))
    return "\n".join(out)
