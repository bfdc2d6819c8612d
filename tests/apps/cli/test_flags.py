"""``edgerl.apps.cli.flags``: one argument group per concern, shared by the verbs, with the
flags' names and defaults the verbs had."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from edgerl.apps.cli import build_parser, flags
from edgerl.apps.cli.bench import BENCHES
from edgerl.bench.loop.timing import LoopTiming


def _sub(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    """The sub-parser ``parser names[0] names[1] ...``."""
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _groups(parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """Group title -> the long option strings in it."""
    return {g.title: {s for a in g._group_actions for s in a.option_strings if s.startswith("--")}
            for g in parser._action_groups}


@pytest.mark.parametrize("target", sorted(set(BENCHES) - {"all"}))
def test_every_bench_target_prints_json_from_the_output_group(target):
    assert "--json" in _groups(_sub(build_parser(), "bench", target))["output"]


def test_loop_and_spin_share_the_timing_planner_and_rt_groups():
    parser = build_parser()
    loop, spin = _sub(parser, "bench", "loop"), _sub(parser, "bench", "spin")
    timing = {"--rate", "--seconds", "--warmup", "--spin-us", "--switch-interval-us",
              "--spin-switch-interval-us", "--prewarm-us"}
    assert _groups(loop)["loop timing"] == _groups(spin)["loop timing"] == timing
    assert _groups(loop)["real-time"] == _groups(spin)["real-time"] == {
        "--rt-priority", "--loop-cpus", "--planner-cpus"}
    assert {"--planner-process", "--planner-latency-ms", "--planner-period-ms"} \
        <= _groups(loop)["planner"] & _groups(spin)["planner"]
    # the defaults each verb had
    a = parser.parse_args(["bench", "loop", "--bundle", "b"])
    assert (a.rate, a.seconds, a.warmup, a.planner_period_ms) == (None, 10.0, 1.0, None)
    assert (a.bundle, a.loop_cpus, a.planner, a.planner_latency_ms) == (Path("b"), "", "auto", 70.0)
    b = parser.parse_args(["bench", "spin"])
    assert (b.rate, b.seconds, b.warmup, b.planner_period_ms) == (1000.0, 5.0, 0.5, 100.0)
    assert b.bundle is None and (b.spin_us, b.prewarm_us, b.rt_priority) == (300.0, 150.0, 0)


def test_loop_timing_round_trips_through_bench_loops_flags():
    """``edgerl bench spin`` starts ``edgerl bench loop`` with ``LoopTiming.argv()``: those
    flags parse back into the same timing."""
    timing = LoopTiming(seconds=0.25, warmup_s=0.0, rate_hz=333.0, spin_us=120.0,
                        switch_interval_us=0.0, spin_switch_interval_us=900.0, prewarm_us=0.0,
                        rt_priority=7)
    args = build_parser().parse_args(["bench", "loop", "--bundle", "b", *timing.argv()])
    assert flags.loop_timing(args) == timing
    unset = build_parser().parse_args(["bench", "loop", "--bundle", "b",
                                       *LoopTiming(rate_hz=None).argv()])
    assert unset.rate is None
    assert LoopTiming.interval_s(0.0) is None
    assert LoopTiming.interval_s(200.0) == pytest.approx(2e-4)


def test_a_concerns_helpers_share_one_group():
    p = argparse.ArgumentParser()
    flags.add_episode_flags(p, num_envs=(8, "envs"))
    g = flags.add_episode_flags(p, seed=(0, "seed"))
    assert _groups(p)["envs and episodes"] == {"--num-envs", "--seed"}
    assert g.title == "envs and episodes"
    args = p.parse_args(["--num-envs", "3"])
    assert (args.num_envs, args.seed) == (3, 0)


def test_output_flags_add_only_the_files_asked_for():
    p = argparse.ArgumentParser()
    flags.add_output_flags(p, json="one JSON object", latency_model="write it here")
    assert _groups(p)["output"] == {"--json", "--write-latency-model"}
    args = p.parse_args(["--write-latency-model", "lat.json"])
    assert args.write_latency_model == Path("lat.json") and args.json is False
