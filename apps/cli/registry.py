"""Sub-commands from a registry of modules (the verbs of ``edgerl``, the targets of
``edgerl bench``).

Each module named in a registry defines ``HELP`` (one line), ``add_arguments(p)`` and
``run(args) -> int``; it is imported when the parser is built (heavy imports stay inside
``run``), so ``--help`` lists every entry in registry order.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Mapping

__all__ = ["add_module_parsers"]


def add_module_parsers(parser: argparse.ArgumentParser, modules: Mapping[str, str], *,
                       dest: str, metavar: str, run_attr: str) -> None:
    """Add a required sub-command to ``parser`` for each ``name -> module`` of ``modules``:
    the chosen name lands in ``args.<dest>``, its module's ``run`` in ``args.<run_attr>``."""
    sub = parser.add_subparsers(dest=dest, metavar=metavar, required=True)
    for name, module_name in modules.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(**{run_attr: module.run})
