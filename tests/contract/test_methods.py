"""The methods registry (contract/methods.py): one frozen entry per method, derived name lists."""

from __future__ import annotations

import dataclasses

import pytest

from edgerl.contract.methods import (
    CHUNK_METHODS,
    EDIT_METHODS,
    LEARNED_METHODS,
    METHODS,
    OPEN_LOOP_METHODS,
    SCHEDULED_METHODS,
    get_method,
    method_names,
)


def test_name_lists_follow_the_fields():
    assert METHODS == ("nodelay", "naive", "arli", "edit", "edit_zero_chunks", "planner",
                       "blend", "rtc")
    assert LEARNED_METHODS == ("nodelay", "naive", "arli", "edit", "edit_zero_chunks")
    assert EDIT_METHODS == ("edit", "edit_zero_chunks")
    assert set(CHUNK_METHODS) == {"edit", "planner", "blend", "rtc"}
    assert set(SCHEDULED_METHODS) == {*CHUNK_METHODS, "edit_zero_chunks"}
    assert OPEN_LOOP_METHODS == ("planner", "blend", "rtc")
    assert method_names(action_delayed=True) == ("naive", "arli")
    assert method_names(no_delay=True) == ("nodelay",)


def test_single_purpose_fields():
    assert get_method("rtc").conditions_on_prefix and get_method("blend").blends
    assert get_method("edit_zero_chunks").zero_chunks
    assert get_method("edit_zero_chunks").not_deployable
    assert not any(get_method(m).not_deployable for m in METHODS if m != "edit_zero_chunks")
    assert all(get_method(m).summary for m in METHODS)


def test_unknown_method_lists_the_known_and_entries_are_frozen():
    with pytest.raises(ValueError, match="unknown method 'x'; choose one of nodelay, naive"):
        get_method("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_method("edit").learned = False  # type: ignore[misc]
