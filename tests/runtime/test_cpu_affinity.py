"""CPU affinity of the real-time threads: parsing, refusal of CPUs this process may not use
(named, nothing left running), and the pinning of the edit loop's thread, the bare loop's and
a planner process (which inherits its client thread's CPUs)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from edgerl.bench.loop.bare_loop import BareLoopConfig, run_bare_loop
from edgerl.runtime.chunk_buffer import ChunkBuffer
from edgerl.runtime.cpu_affinity import allowed_cpus, check_cpus, parse_cpus, pin_thread
from edgerl.runtime.edit_loop import EditLoop, LoopConfig, ObservationSlot
from edgerl.runtime.planners.client.client import PlannerClient, PlannerClientConfig
from tests.helpers.specs import make_spec

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"),
                                reason="needs Linux sched_setaffinity")

#: a CPU this process may run on, and one it certainly may not
CPU = min(allowed_cpus())
ABSENT = max(allowed_cpus()) + 4096


@pytest.mark.parametrize("text, cpus", [("", ()), ("1", (1,)), ("0,2", (0, 2)),
                                        ("2-3", (2, 3)), ("3, 0-1,1", (0, 1, 3))])
def test_parse_cpus_reads_lists_and_ranges(text, cpus):
    assert parse_cpus(text) == cpus


@pytest.mark.parametrize("text, part", [("a", "'a'"), ("1,x-2", "'x-2'"), ("3-1", "'3-1'"),
                                        ("-1", "'-1'")])
def test_parse_cpus_names_the_part_it_cannot_read(text, part):
    with pytest.raises(ValueError, match=part):
        parse_cpus(text)


def test_check_cpus_names_a_cpu_this_process_may_not_use():
    assert check_cpus([CPU, CPU], "loop cpus") == (CPU,)
    with pytest.raises(ValueError, match=rf"loop cpus \[{ABSENT}\]: CPU {ABSENT} is not "
                                         r"available to this process \(allowed: \["):
        check_cpus([ABSENT], "loop cpus")


def test_pin_thread_pins_only_the_calling_thread():
    before = os.sched_getaffinity(0)
    seen = {}

    def worker() -> None:
        seen["got"] = pin_thread([CPU], "test")
        seen["inside"] = os.sched_getaffinity(0)

    import threading

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == {"got": (CPU,), "inside": {CPU}}
    assert os.sched_getaffinity(0) == before  # the caller's thread is untouched
    assert pin_thread((), "test") == ()


def test_bare_loop_runs_pinned_and_reports_it():
    out = run_bare_loop(BareLoopConfig(rate_hz=1000.0, seconds=0.05, warmup_s=0.0,
                                       cpus=(CPU,)))
    # pinning is the behaviour here, not the rate: on a loaded machine the pinned thread
    # shares its CPU, so it may get fewer ticks than 50, never more than the clock allows
    assert out["cpus"] == [CPU] and 1 <= out["ticks"] <= 52
    assert run_bare_loop(BareLoopConfig(seconds=0.02, warmup_s=0.0))["cpus"] == []
    with pytest.raises(ValueError, match=f"bare loop cpus .*CPU {ABSENT} is not available"):
        BareLoopConfig(cpus=(ABSENT,))


def _loop(cpus) -> EditLoop:
    return EditLoop(make_spec(obs_dim=3, action_dim=2, method="planner"), None, ChunkBuffer(),
                    cfg=LoopConfig(rate_hz=200.0, cpus=cpus), sink=lambda cmd, t: True)


def test_edit_loop_thread_is_pinned_to_its_cpus():
    loop = _loop((CPU,))
    loop.start()
    try:
        end = time.monotonic() + 5.0
        while loop.cpus_applied == () and time.monotonic() < end:
            time.sleep(0.01)
        assert loop.cpus_applied == (CPU,)
        assert os.sched_getaffinity(loop._thread.native_id) == {CPU}
    finally:
        loop.stop()
    assert _loop(()).cpus_applied == ()


def test_edit_loop_refuses_an_unavailable_cpu_before_starting_a_thread():
    loop = _loop((ABSENT,))
    with pytest.raises(ValueError, match=f"loop cpus \\[{ABSENT}\\]: CPU {ABSENT} is not"):
        loop.start()
    assert not loop.running and loop._thread is None
    with pytest.raises(ValueError, match="cpus must be CPU numbers >= 0"):
        LoopConfig(cpus=(-1,))


def test_planner_process_inherits_the_client_threads_cpus():
    slot = ObservationSlot(3)
    slot.write(np.zeros(3, np.float32), time.perf_counter())
    kwargs = {"horizon": 5, "action_dim": 2, "dt_s": 0.01, "period_s": 0.05, "latency_s": 0.0}
    buf = ChunkBuffer()
    client = PlannerClient("edgerl.runtime.planners.local.synthetic:burn_planner", buf, slot,
                           PlannerClientConfig(mode="process", factory_kwargs=kwargs,
                                               cpus=(CPU,)))
    client.start()
    try:
        end = time.monotonic() + 60.0
        while (client.pid is None or buf.latest() is None) and time.monotonic() < end:
            time.sleep(0.01)
        assert buf.latest() is not None, client.stats()
        assert os.sched_getaffinity(client.pid) == {CPU}
    finally:
        client.stop()
    with pytest.raises(ValueError, match=f"planner cpus .*CPU {ABSENT} is not available"):
        PlannerClientConfig(cpus=(ABSENT,))
