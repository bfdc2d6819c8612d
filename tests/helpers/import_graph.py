"""The import graph of a source tree: every import of a module (:class:`ImportVisitor`) and the
cycles among modules (:func:`cycles`), for tests/test_architecture.py."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Import", "ImportVisitor", "cycles"]


@dataclass(frozen=True)
class Import:
    line: int
    module: str
    top_level: bool  # runs when the module is imported (not inside a function)


class ImportVisitor(ast.NodeVisitor):
    """Every import of a module's source: statements at any depth, relative ones resolved
    against ``package``, and strings naming a module (``is_module``; registry entry points
    such as ``"pkg.mod:factory"``, matched by ``module_string``), except a module run in a
    child process's command line (``[..., "-m", "pkg.mod", ...]``)."""

    def __init__(self, package: str, is_module: Callable[[str], bool],
                 module_string: re.Pattern[str]) -> None:
        self.package, self.depth, self.found = package, 0, []
        self.is_module, self.module_string = is_module, module_string
        self.child_argv: set[int] = set()

    def _add(self, node: ast.AST, module: str) -> None:
        self.found.append(Import(node.lineno, module, self.depth == 0))

    def visit_FunctionDef(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_Lambda = visit_FunctionDef

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        """``from pkg import name`` imports ``pkg.name`` where that is a module, else ``pkg``."""
        if node.level == 0:
            module = node.module or ""
        else:
            base = self.package.split(".")
            base = base[:len(base) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        submodules = [f"{module}.{a.name}" for a in node.names
                      if self.is_module(f"{module}.{a.name}")]
        for name in submodules or [module]:
            self._add(node, name)

    def visit_List(self, node: ast.List | ast.Tuple) -> None:
        """``[..., "-m", "edgerl.apps", ...]`` runs a module in a child process: a command
        line, not an import (the child is a separate program)."""
        for before, item in zip(node.elts, node.elts[1:]):
            if (isinstance(before, ast.Constant) and before.value == "-m"
                    and isinstance(item, ast.Constant)):
                self.child_argv.add(id(item))
        self.generic_visit(node)

    visit_Tuple = visit_List

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and id(node) not in self.child_argv:
            match = self.module_string.fullmatch(node.value)
            if match and self.is_module(match.group(1)):
                self._add(node, match.group(1))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)
