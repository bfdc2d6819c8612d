"""``edgerl hil --rt-priority``: SCHED_FIFO where permitted (reported, never fatal) and a
frozen GC during the run (the interleaved benchmark against ``edgerl bench serial`` is
tests/bench/hil/test_rt_ratio.py)."""

from __future__ import annotations

import gc
import os
import threading

import pytest

from edgerl.hil import rt


def _in_thread(fn):
    """Run ``fn`` in a fresh thread (scheduling changes stay off the test runner's thread)."""
    out: list = []
    th = threading.Thread(target=lambda: out.append(fn()))
    th.start()
    th.join()
    return out[0]


def test_realtime_refused_runs_on_with_a_frozen_gc_and_says_why(monkeypatch):
    def refuse(*args):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)

    def body():
        with rt.realtime(20) as state:
            return state.as_dict(), gc.get_freeze_count() > 0, os.sched_getscheduler(0)

    info, frozen, policy = _in_thread(body)
    assert info["rt_granted"] is False and "CAP_SYS_NICE" in info["rt_error"]
    assert info["gc_frozen"] is True and frozen and policy != os.SCHED_FIFO
    assert gc.get_freeze_count() == 0  # unfrozen on exit


def test_realtime_granted_where_permitted_and_restored():
    def body():
        before = os.sched_getscheduler(0)
        with rt.realtime(3) as state:
            inside = os.sched_getscheduler(0)
        return state, before, inside, os.sched_getscheduler(0)

    state, before, inside, after = _in_thread(body)
    if not state.granted:
        pytest.skip(f"SCHED_FIFO not permitted here: {state.error}")
    assert inside == os.SCHED_FIFO and after == before and state.error == ""
    with rt.realtime(0) as off:
        assert off.as_dict() == {"rt_granted": False, "rt_error": None, "gc_frozen": False}
