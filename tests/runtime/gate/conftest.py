"""Fixtures for the runtime gate's tests: the rule-gate driving bundle."""

from __future__ import annotations

import pytest

from tests.helpers.gate_bundles import write_gate_bundle


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """The rule-gate driving bundle (see tests/helpers/gate_bundles.py), once per module. Its
    gate layout comes from the sim's gated driving scenario, so it needs the training side
    (torch): on the edge install these tests skip."""
    pytest.importorskip("torch", reason="the gate bundle's layout comes from the sim (torch)")
    return write_gate_bundle(tmp_path_factory.mktemp("gate") / "bundle")
