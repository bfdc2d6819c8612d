"""Logging set-up and progress reporting for the CLI and long-running jobs.

Libraries log through ``logging.getLogger(__name__)``; only the CLI configures handlers.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["progress", "setup_logging"]

T = TypeVar("T")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def setup_logging(level: str = "INFO") -> None:
    """Configure the root logger (rich handler when rich is installed and stderr is a tty)."""
    level = level.upper()
    if level not in LEVELS:
        raise ValueError(f"unknown log level {level!r}; choose one of {', '.join(LEVELS)}")
    handler: logging.Handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    if sys.stderr.isatty():
        try:
            from rich.logging import RichHandler

            handler = RichHandler(show_path=False)
        except ImportError:  # the [runtime] install has no rich
            pass
    logging.basicConfig(level=level, handlers=[handler], force=True)


def progress(items: Iterable[T], *, total: int | None = None, desc: str = "",
             disable: bool | None = None) -> Iterator[T]:
    """Wrap an iterable in a progress bar (tqdm) on a terminal; plain iteration otherwise.

    ``disable=None`` shows the bar only when stderr is a tty, so CI logs stay clean.
    """
    if disable is None:
        disable = not sys.stderr.isatty()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        yield from items
        return
    yield from tqdm(items, total=total, desc=desc, disable=disable, dynamic_ncols=True)
