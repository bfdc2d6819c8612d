"""The operator intervention record: validation errors, and the slot's override/start/e-stop
semantics."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.contract.intervention import (
    Intervention,
    InterventionError,
    InterventionSlot,
    validate_intervention,
)


def test_valid_records_pass():
    validate_intervention(Intervention("override", 1.0, np.array([0.5, -0.5], np.float32)), 2,
                          now=1.1)
    validate_intervention(Intervention("estop", 1.0), 2, now=1.0)
    validate_intervention(Intervention("release", 1.0), 2, now=1.005)  # within the skew


@pytest.mark.parametrize("iv, match", [
    (Intervention("takeover", 1.0), "kind 'takeover' is not one of override, estop, release"),
    (Intervention("release", float("nan")), "stamp nan is not finite"),
    (Intervention("release", 2.0), "in the future"),
    (Intervention("release", 0.2), "stale: stamped 0.800 s ago"),
    (Intervention("override", 1.0, np.zeros(3, np.float32)), r"shape \(3,\), the action has 2"),
    (Intervention("override", 1.0, np.array([0.1, np.inf], np.float32)), "not finite"),
    (Intervention("estop", 1.0, np.zeros(2, np.float32)), "estop carries no command, got 2"),
])
def test_bad_records_name_the_problem(iv, match):
    with pytest.raises(InterventionError, match=match):
        validate_intervention(iv, 2, now=1.0)


def test_slot_override_start_release_and_estop():
    slot = InterventionSlot(1)
    out = np.zeros(1, np.float32)
    assert slot.read_into(out) == (False, False)
    slot.push(Intervention("override", 0.0, np.array([0.3], np.float32)), 0.0)
    slot.push(Intervention("override", 0.01, np.array([0.4], np.float32)), 0.01)
    assert slot.read_into(out) == (True, True) and out[0] == pytest.approx(0.4)
    assert slot.read_into(out) == (True, False)  # the same takeover: no second start
    slot.push(Intervention("release", 0.02), 0.02)
    assert slot.read_into(out) == (False, False)
    with pytest.raises(InterventionError):
        slot.push(Intervention("override", 0.03, np.zeros(2, np.float32)), 0.03)
    assert not slot.active and slot.counts == {"override": 2, "estop": 0, "release": 1}
    assert not slot.take_estop()
    slot.push(Intervention("estop", 0.04), 0.04)
    assert slot.take_estop() and not slot.take_estop()
