"""Package discovery for edgerl's layout.

Every top-level folder named as a layer installs as ``edgerl.<folder>`` (``contract/`` ->
``edgerl.contract``, ``runtime/`` -> ``edgerl.runtime``, ...): a module's import path is its
folder path with ``edgerl.`` in front. ``edgerl`` itself is a namespace package with no folder
of its own, so no folder of the checkout shadows the installed package. Every sub-folder holding
an ``__init__.py`` becomes a package, so new modules never go missing from a wheel.
"""

from __future__ import annotations

import os

from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))
#: the layers, bottom to top (tests/test_architecture.py holds their import rules)
LAYER_FOLDERS = ("contract", "sim", "runtime", "policies", "export", "hil", "bench", "apps")
SUBPACKAGE_FOLDERS = {folder: f"edgerl.{folder}" for folder in LAYER_FOLDERS}


def discover() -> tuple[list[str], dict[str, str]]:
    """Return (packages, package_dir) for every folder with an ``__init__.py``."""
    packages: list[str] = []
    package_dir: dict[str, str] = {}
    for folder, dotted in SUBPACKAGE_FOLDERS.items():
        package_dir[dotted] = folder
        for here, dirs, files in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
            if "__init__.py" not in files:
                dirs[:] = []
                continue
            rel = os.path.relpath(here, os.path.join(ROOT, folder))
            packages.append(dotted if rel == "." else dotted + "." + rel.replace(os.sep, "."))
    return packages, package_dir


PACKAGES, PACKAGE_DIR = discover()
setup(packages=PACKAGES, package_dir=PACKAGE_DIR)
