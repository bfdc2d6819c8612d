"""Every config that replaced a run script issues what the script ran.

``experiments/<question>/legacy/<name>.commands`` is the trace of the script (or documented
command) as it was in git before it became a config (``tools/trace_legacy_scripts.py``: the
script run with stand-ins that log each step); the config's ``--dry-run`` must list the same
steps in the same order. Differences allowed, each for a stated reason:

* the measuring programs moved: ``python benchmarks/X.py`` is ``python -m
  edgerl.apps.experiments.probes.X`` (:data:`RENAMED`);
* a background step (a burner beside a loop, the two sides of a paired gate run) ends in ``&``;
  the trace ran the script's jobs one after another;
* a step that wrote a throwaway test bundle with ``tests.helpers`` is gone: the product does not
  import tests, so the config takes the bundle as a setting.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from edgerl.apps.experiments.runner import dry_run_lines

ROOT = Path(__file__).resolve().parents[3]
RENAMED = {
    "python -m edgerl.apps.experiments.probes.burn": "python benchmarks/loop_misses/burn.py",
    "python -m edgerl.apps.experiments.probes.ros2_roundtrip":
        "python benchmarks/ros2_roundtrip.py",
    "python -m edgerl.apps.experiments.probes.deploy_trigger_table":
        "python benchmarks/deploy_trigger_table.py",
}
TRACED = sorted(p.parent.parent / f"{p.stem}.toml"
                for p in (ROOT / "experiments").glob("*/legacy/*.commands"))


def _normalise(line: str) -> str:
    line = re.sub(r" &$", "", line)
    for new, old in RENAMED.items():
        line = line.replace(new, old)
    return line


def _expected(config: Path) -> list[str]:
    trace = config.parent / "legacy" / f"{config.stem}.commands"
    return [line for line in trace.read_text().splitlines()
            if not line.startswith("#") and "tests.helpers" not in line]


def test_every_traced_script_has_its_config():
    assert len(TRACED) >= 30
    assert all(p.is_file() for p in TRACED), [p for p in TRACED if not p.is_file()]


@pytest.mark.parametrize("config", TRACED, ids=[p.stem for p in TRACED])
def test_dry_run_issues_what_the_script_ran(config):
    got = [_normalise(line) for line in dry_run_lines(config, ROOT) if not line.startswith("#")]
    assert got == _expected(config)
