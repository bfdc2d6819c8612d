"""``edgerl bench ratios``: every path against its own limit, measured in the same run.

The rows (``sim/<task>``, ``train/<task>``, ``loop/jitter_p99``, ``loop/miss_rate``,
``hil/rtt_p99``, ``ros2/e2e_p99``, ``ros2/node_tick_p99``), their references and targets are
:mod:`edgerl.bench.ratios`'. This verb parses the flags into a
:class:`~edgerl.bench.ratios_config.RatiosConfig`, runs it, and prints the table (``--json``: the
run's line); ``--record experiments`` writes the run into the results store (a
``bench-ratios`` results file with command, commit, date and load), ``--history`` appends the
line to a JSON-lines file, and ``--png`` redraws the trend of every ratio over the recorded
runs. ``make bench`` runs it (``edgerl bench all``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

if TYPE_CHECKING:
    from edgerl.bench.ratios_config import RatiosConfig

HELP = "ratio of each path to its limit measured in the same run; appends a history line"


def _tasks(text: str) -> tuple[str, ...]:
    return tuple(t for t in text.split(",") if t)


def add_arguments(p: argparse.ArgumentParser) -> None:
    sim = p.add_argument_group("sim rows")
    sim.add_argument("--sim-tasks", type=_tasks, default="arm_reach,arm_push,ball_balance",
                     help="MuJoCo tasks for sim ratios ('' = skip)")
    sim.add_argument("--sim-envs", type=int, default=256, help="envs per sim task (default 256)")
    sim.add_argument("--sim-steps", type=int, default=20, help="steps per sim block")
    sim.add_argument("--sim-repeats", type=int, default=15,
                     help="interleaved (task, raw) blocks; the best of each side is compared")
    train = p.add_argument_group("train rows")
    train.add_argument("--train-tasks", type=_tasks, default="cartpole,ball_balance",
                       help="tasks for the trainer ratio ('' = skip)")
    train.add_argument("--train-envs", type=int, default=64, help="envs per trainer (default 64)")
    train.add_argument("--train-steps-per-env", type=int, default=32)
    train.add_argument("--train-iterations", type=int, default=3,
                       help="PPO iterations per block")
    train.add_argument("--train-repeats", type=int, default=3, help="(ours, bare) pairs")
    flags.add_bundle_flags(p, help="edit bundle for the loop ratios (none = skip them)")
    loop = p.add_argument_group("loop rows")
    loop.add_argument("--loop-rate", type=float, default=1000.0)
    loop.add_argument("--loop-seconds", type=float, default=10.0, help="seconds per loop block")
    loop.add_argument("--loop-pairs", type=int, default=1,
                      help="(bare, loop) pairs (0 = skip the loop rows)")
    loop.add_argument("--miss-alpha", type=float, default=0.05,
                      help="level of the miss-rate test (one-sided; default 0.05)")
    flags.add_rt_flags(p, "both loops", loop_cpus="both loops' threads",
                       planner_cpus="the edit loop's planner")
    flags.add_planner_flags(p, burn=False, process_help="run the loop rows' burn planner in its "
                                                        "own process (default: a thread of the "
                                                        "loop's process)")
    hil = p.add_argument_group("hil row")
    hil.add_argument("--hil-runs", type=int, default=1,
                     help="(paced bench serial, bench serial, hil) sets for hil/rtt_p99 (0 = skip)")
    flags.add_firmware_flags(p, watchdog_ms=None, flag="--hil-target", scope="hil row: ")
    hil.add_argument("--hil-rt-priority", type=int, default=10,
                     help="SCHED_FIFO priority of the hil row's processes (firmware +1; 0 = off)")
    hil.add_argument("--hil-episodes", type=int, default=2, help="hil episodes per set")
    hil.add_argument("--hil-max-steps", type=int, default=250, help="hil steps per episode")
    p.add_argument_group("ros2 rows").add_argument(
        "--ros2-seconds", type=float, default=10.0,
        help="seconds of the deploy and of the bench loop behind the ros2 rows (needs --bundle "
             "and rclpy; 0 = skip)")
    out = flags.add_output_flags(p, json="the run's line as JSON",
                                 png="write the trend plot of the recorded runs here")
    out.add_argument("--record", type=lambda v: Path(v) if v else None, default=None,
                     metavar="STORE",
                     help="write the run into this results store (experiments/) as a "
                          "bench-ratios results file (default: do not)")
    out.add_argument("--history", type=lambda v: Path(v) if v else None, default=None,
                     help="also append the run's JSON line to this file (default: do not)")


def config(args: argparse.Namespace) -> RatiosConfig:
    """The :class:`~edgerl.bench.ratios_config.RatiosConfig` of the parsed flags (``CliError`` for
    sizes out of range)."""
    from edgerl.bench.loop.spin import SpinConfig
    from edgerl.bench.loop.timing import LoopTiming
    from edgerl.bench.ratios_config import HilRow, RatiosConfig, SimRows, TrainRows

    if min(args.sim_envs, args.sim_steps, args.sim_repeats, args.train_envs,
           args.train_steps_per_env, args.train_iterations, args.train_repeats,
           args.hil_episodes, args.hil_max_steps) < 1 \
            or not args.loop_seconds > 0 or args.loop_pairs < 0 or not args.ros2_seconds >= 0:
        raise CliError("sizes, steps, iterations, repeats and hil episodes / steps must be "
                       ">= 1, --loop-pairs and --ros2-seconds >= 0 and --loop-seconds > 0")
    if args.hil_runs < 0 or not 0 < args.miss_alpha < 0.5:
        raise CliError(f"--hil-runs must be >= 0 (got {args.hil_runs}) and --miss-alpha in "
                       f"(0, 0.5) (got {args.miss_alpha})")
    if args.bundle is not None and not (args.bundle / "manifest.json").is_file():
        raise CliError(f"--bundle {args.bundle}: no manifest.json (not a bundle)")
    timing = LoopTiming(rate_hz=args.loop_rate, seconds=args.loop_seconds, warmup_s=0.5,
                        rt_priority=args.rt_priority)
    return RatiosConfig(
        sim=SimRows(tasks=args.sim_tasks, envs=args.sim_envs, steps=args.sim_steps,
                    repeats=args.sim_repeats),
        train=TrainRows(tasks=args.train_tasks, envs=args.train_envs,
                        steps_per_env=args.train_steps_per_env,
                        iterations=args.train_iterations, repeats=args.train_repeats),
        bundle=args.bundle,
        loop=SpinConfig(pairs=args.loop_pairs, loop_cpus=args.loop_cpus,
                        planner_cpus=args.planner_cpus, timing=timing,
                        planner_process=args.planner_process),
        miss_alpha=args.miss_alpha,
        hil=HilRow(target=args.hil_target, runs=args.hil_runs, rt_priority=args.hil_rt_priority,
                   episodes=args.hil_episodes, max_steps=args.hil_max_steps),
        ros2_seconds=args.ros2_seconds, history=args.history, record=args.record, png=args.png)


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_result
    from edgerl.bench.ratios import bounds, measure_ratios, target_text

    line = measure_ratios(config(args))
    rows = [{"ratio": name, "value": r["ratio"], "ours": r["ours"], "reference": r["reference"],
             "unit": r["unit"], "target": target_text(name), "bounds": bounds(r),
             "met": "-" if r["met"] is None else r["met"]} for name, r in line["ratios"].items()]
    print_result(line, as_json=args.json, rows=rows,
                 title=f"edgerl bench ratios (load {line['load_before']} -> {line['load_after']})")
    return 0
