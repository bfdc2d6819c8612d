"""Package discovery for edgerl's layout.

The import root is ``edgerl/``; the top-level folders ``sim/``, ``policies/``, ``export/`` and
``runtime/`` install as ``edgerl.sim``, ``edgerl.policies``, ``edgerl.export`` and
``edgerl.runtime``. Every sub-folder holding an ``__init__.py`` becomes a package, so new
modules never go missing from a wheel.
"""

from __future__ import annotations

import os

from setuptools import setup

ROOT = os.path.dirname(os.path.abspath(__file__))
SUBPACKAGE_FOLDERS = {"edgerl": "edgerl", "sim": "edgerl.sim", "policies": "edgerl.policies",
                      "export": "edgerl.export", "runtime": "edgerl.runtime"}


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
