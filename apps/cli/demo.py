"""``edgerl demo``: train -> export -> ROS 2 deploy -> firmware-in-the-loop -> report."""

from __future__ import annotations

import argparse

from edgerl.apps.cli import flags

HELP = ("the main job: train a latency-aware edit policy, export it, deploy it on ROS 2 and "
        "drive the firmware over a pty, then report")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", default="cartpole_goal",
                   help="task (default cartpole_goal: the goal is known to the planner only)")
    p.add_argument("--fast", action="store_true",
                   help="smaller budget: training <= 2 min on 2 cores, shorter deploy/eval")
    train = p.add_argument_group("training")
    train.add_argument("--delay-steps", type=int, default=10,
                       help="planner delay in control steps (default 10 = 200 ms at 50 Hz)")
    train.add_argument("--delay-jitter-steps", type=int, default=4,
                       help="extra planner delay 0..J steps per training episode (default 4)")
    train.add_argument("--planner", default="bc", choices=("bc", "expert"),
                       help="chunk planner (default bc: learned, exported as planner.onnx)")
    train.add_argument("--iterations", type=int, default=None,
                       help="PPO iteration cap for the edit policy (default 400, --fast 250)")
    train.add_argument("--naive-iterations", "--control-iterations", type=int, default=None,
                       dest="naive_iterations",
                       help="PPO iteration cap of the trained controls (naive, "
                            "edit_zero_chunks), 0 = skip them (default 400, --fast 250)")
    flags.add_episode_flags(p, episodes=(None, "evaluation episodes per method (default 100, "
                                               "--fast 50)"),
                            seed=(0, "training seed (default 0)"))
    stages = p.add_argument_group("deploy and firmware stages")
    stages.add_argument("--deploy-s", type=float, default=None,
                        help="seconds the ROS 2 graph runs (default 8)")
    stages.add_argument("--hil-episodes", type=int, default=None,
                        help="firmware-in-the-loop episodes (default 3, --fast 1)")
    out = flags.add_output_flags(p, json="the report as one JSON object")
    out.add_argument("--out", default="runs/demo",
                     help="output directory (default runs/demo; an earlier demo output there is "
                          "replaced)")
    out.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def run(args: argparse.Namespace) -> int:
    import logging
    from pathlib import Path

    from edgerl.apps.cli.errors import CliError
    from edgerl.apps.cli.output import print_json
    from edgerl.apps.demo.config import DemoConfig, DemoError
    from edgerl.apps.demo.pipeline import run_demo
    from edgerl.apps.demo.report import render_report
    from edgerl.sim.registry import get_task_info

    log = logging.getLogger("edgerl.apps.demo")
    try:
        get_task_info(args.task)
    except KeyError as exc:
        raise CliError(exc.args[0]) from exc
    cfg = DemoConfig.preset(
        args.fast, task=args.task, out=Path(args.out), delay_steps=args.delay_steps,
        delay_jitter_steps=args.delay_jitter_steps,
        planner=args.planner, iterations=args.iterations,
        naive_iterations=args.naive_iterations, eval_episodes=args.episodes,
        deploy_s=args.deploy_s, hil_episodes=args.hil_episodes, seed=args.seed,
        show_progress=not args.no_progress)

    def on_stage(s) -> None:
        log.info("stage %-26s %-4s %6.1f s  %s", s.stage, "ok" if s.ok else "FAIL", s.seconds,
                 s.result)

    try:
        report = run_demo(cfg, on_stage=on_stage)
    except DemoError as exc:
        raise CliError(str(exc)) from exc
    if args.json:
        print_json(report)
    else:
        render_report(report)
    return int(report["exit_code"])
