"""``edgerl.bench.loop.spin``: the bare loop's block, and the ``edgerl bench loop`` command
the edit loop's block runs (same timing as the bare one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgerl.apps.cli import build_parser
from edgerl.bench.loop.spin import SpinConfig, bare, edit_loop_argv
from edgerl.bench.loop.timing import LoopTiming
from edgerl.contract.errors import UserError


def test_a_bare_block_runs_the_configured_rate_and_span():
    out = bare(SpinConfig(timing=LoopTiming(rate_hz=500.0, seconds=0.2, warmup_s=0.0)))
    assert out["rate_hz"] == 500.0 and out["ticks"] + out["skipped_ticks"] >= 95


def test_a_bad_cpu_list_is_a_user_error():
    with pytest.raises(UserError, match="CPU list '2-1'"):
        bare(SpinConfig(loop_cpus="2-1", timing=LoopTiming(rate_hz=500.0, seconds=0.1)))


@pytest.mark.parametrize("process", [False, True])
def test_the_edit_loop_block_is_bench_loop_with_the_same_timing(process):
    timing = LoopTiming(rate_hz=250.0, seconds=0.5, warmup_s=0.1, rt_priority=5)
    cfg = SpinConfig(bundle=Path("b"), timing=timing, loop_cpus="1", planner_cpus="0",
                     planner_process=process, planner_latency_ms=30.0)
    args = build_parser().parse_args(edit_loop_argv(cfg))
    assert (args.verb, args.target, args.bundle, args.planner) == ("bench", "loop", Path("b"),
                                                                   "burn")
    assert (args.rate, args.seconds, args.warmup, args.rt_priority) == (250.0, 0.5, 0.1, 5)
    assert (args.loop_cpus, args.planner_cpus, args.planner_process) == ("1", "0", process)
    assert (args.planner_latency_ms, args.planner_period_ms, args.json) == (30.0, 100.0, True)
