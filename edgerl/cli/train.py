"""``edgerl train``: train one method on one task with rsl-rl-lib PPO."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = ("train a latency-aware policy (nodelay/naive/arli/edit/edit_zero_chunks) or set up a "
        "planner/blend/rtc baseline")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from edgerl.policies.config import EDIT_INPUTS, METHODS, PLANNERS

    p.add_argument("task", help="registered task name (see `edgerl tasks`)")
    p.add_argument("--method", default="edit", choices=METHODS, help="method (default edit)")
    p.add_argument("--delay-steps", type=int, default=0,
                   help="planner/action delay D in control steps (default 0)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--num-envs", type=int, default=None,
                   help="parallel envs (default: the task's, edgerl.policies.task_defaults; "
                        "64 for untuned tasks on the CPU)")
    p.add_argument("--iterations", type=int, default=100, help="PPO iterations (default 100)")
    p.add_argument("--steps-per-env", type=int, default=None,
                   help="rollout steps per env per iteration (default: the task's; 32 for "
                        "untuned tasks on the CPU)")
    p.add_argument("--learning-rate", type=float, default=None,
                   help="PPO initial learning rate (default: the task's; 1e-3 untuned)")
    p.add_argument("--mini-batches", type=int, default=None,
                   help="PPO minibatches per epoch (default: the task's; 4 untuned)")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: small MLPs run fastest single-threaded)")
    p.add_argument("--planner", default="expert", metavar="{" + ",".join(PLANNERS) + "}",
                   help="chunk planner: scripted expert, behaviour-cloned MLP, or "
                        "remote:HOST:PORT for a planner service (edgerl serve-planner) "
                        "(default expert)")
    p.add_argument("--horizon", type=int, default=0, help="chunk rows H (0 = automatic)")
    p.add_argument("--period-steps", type=int, default=0,
                   help="planner query period P in steps (0 = max(1, D))")
    p.add_argument("--residual-bound", type=float, default=0.0,
                   help="edit: max residual per action element (0 = half the range)")
    p.add_argument("--edit-inputs", default="fast", choices=EDIT_INPUTS,
                   help="edit methods: fast = the task's fast observation only (the planner-only "
                        "goal hidden, as on a robot; default); full = every observation field "
                        "(a bounded no-delay policy that may not need the planner)")
    p.add_argument("--privileged", action="store_true",
                   help="nodelay only: read the task's privileged observation (the goal the "
                        "planner knows): the upper bound of the result tables")
    p.add_argument("--stop-at-success", type=float, default=0.0,
                   help="stop once the training success rate (last 100 episodes) reaches this "
                        "(default 0 = run all iterations)")
    p.add_argument("--latency-model", type=Path, default=None, metavar="FILE",
                   help="train with a measured planner delay: a latency model file (from "
                        "`bench planner --write-latency-model`, `deploy/hil "
                        "--write-latency-model`) or a deploy MCAP recording (.mcap)")
    p.add_argument("--trigger", choices=("state", "clock"), default="state",
                   help="how the deployed edit loop ticks (default state: on each state "
                        "message); clock trains with its one-step sampling delay")
    p.add_argument("--task-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="extra task factory argument (repeatable; VALUE parsed as JSON when it "
                        "can be), e.g. --task-arg expert_run=runs/gym:Pendulum-v1__nodelay__...")
    p.add_argument("--out", default=None, help="run directory (default runs/{task}__...)")
    p.add_argument("--root", default="runs", help="parent of auto-named runs (default runs)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def parse_task_args(items: list[str]) -> dict:
    """``["k=v", ...]`` -> ``{"k": json-or-string v}`` (CliError on a malformed item)."""
    import json

    from edgerl.cli import CliError

    out: dict = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"--task-arg {item!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def check_device(device: str) -> None:
    """CliError for an unparsable device or CUDA asked for on a machine without it."""
    import torch

    from edgerl.cli import CliError

    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise CliError(f"--device {device!r}: {exc}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise CliError(f"--device {device}: CUDA is not available (torch {torch.__version__}, "
                       f"CUDA build {torch.version.cuda or 'none'}); use --device cpu")


def config_from_args(args: argparse.Namespace):
    """The :class:`TrainConfig` the flags describe (errors become CliError)."""
    from dataclasses import replace

    from edgerl.cli import CliError
    from edgerl.policies.config import TrainConfig
    from edgerl.policies.task_defaults import apply_task_defaults
    from edgerl.serde import SchemaError

    latency = None
    delay_steps = args.delay_steps
    if getattr(args, "latency_model", None) is not None:
        latency = measured_latency(args.latency_model, args.task, args.period_steps)
        delay_steps = delay_steps or latency.planner_delay_steps
    # flags left unset take the task's defaults for the device (edgerl.policies.task_defaults)
    given = {"num_envs": getattr(args, "num_envs", None),
             "num_steps_per_env": getattr(args, "steps_per_env", None),
             "learning_rate": getattr(args, "learning_rate", None),
             "num_mini_batches": getattr(args, "mini_batches", None)}
    for key, value in given.items():
        if value is not None and value <= 0:
            flag = {"num_envs": "--num-envs", "num_steps_per_env": "--steps-per-env",
                    "learning_rate": "--learning-rate", "num_mini_batches": "--mini-batches"}
            raise CliError(f"{flag[key]}: must be > 0, got {value}")
    try:
        cfg = TrainConfig(task=args.task, method=args.method, delay_steps=delay_steps,
                          seed=args.seed, iterations=args.iterations,
                          device=args.device, planner=args.planner, horizon=args.horizon,
                          period_steps=args.period_steps, residual_bound=args.residual_bound,
                          stop_at_success=args.stop_at_success,
                          edit_inputs=getattr(args, "edit_inputs", "fast"),
                          privileged=bool(getattr(args, "privileged", False)),
                          task_kwargs=parse_task_args(getattr(args, "task_arg", [])),
                          latency_model=latency, trigger=getattr(args, "trigger", "state"))
        cfg = apply_task_defaults(cfg)
        cfg = replace(cfg, **{k: v for k, v in given.items()
                              if v is not None and k in ("num_envs", "num_steps_per_env")},
                      ppo=replace(cfg.ppo, **{k: v for k, v in given.items() if v is not None
                                              and k in ("learning_rate", "num_mini_batches")}))
    except (SchemaError, RuntimeError) as exc:
        raise CliError(str(exc)) from exc
    return cfg


def measured_latency(path: Path, task: str, period_steps: int):
    """The ``LatencyModel`` in ``path`` (latency model JSON or a deploy MCAP recording),
    in control steps of ``task``; CliError when unreadable or measured at another rate."""
    from edgerl.cli import CliError
    from edgerl.runtime.planners.latency_record import (
        chunk_latencies_from_recording,
        load_latency_file,
        measure_latency,
    )
    from edgerl.serde import SchemaError
    from edgerl.sim.registry import get_task_info
    from edgerl.timing import resolve_period

    try:
        hz = float(get_task_info(task).control_hz)
    except KeyError as exc:
        raise CliError(exc.args[0]) from exc
    if not path.is_file():
        raise CliError(f"--latency-model {path}: no such file")
    try:
        if path.suffix == ".mcap":
            from edgerl_ros.recording import read_recording

            lat = chunk_latencies_from_recording(read_recording(path))
            model = measure_latency(lat, hz, 1, str(path)).latency
            model.planner_period_steps = resolve_period(period_steps, model.planner_delay_steps)
            return model
        measured = load_latency_file(path)
    except (SchemaError, ValueError) as exc:
        raise CliError(f"--latency-model {path}: {exc}") from exc
    except ImportError as exc:
        raise CliError(f"--latency-model {path}: reading MCAP needs edgerl_ros and mcap_ros2 "
                       f"({exc})") from exc
    if measured.control_hz is not None and abs(measured.control_hz - hz) > 1e-6 * hz:
        raise CliError(f"--latency-model {path}: measured in steps of {measured.control_hz:g} "
                       f"Hz, but {task} runs at {hz:g} Hz; measure at the task's rate")
    return measured.latency


def run(args: argparse.Namespace) -> int:
    import torch

    from edgerl.cli import CliError
    from edgerl.cli.output import print_json, print_table
    from edgerl.policies.train import train
    from edgerl.sim.registry import get_task_info

    torch.set_num_threads(max(1, args.threads))
    cfg = config_from_args(args)
    check_device(cfg.device)
    try:
        get_task_info(cfg.task)
    except KeyError as exc:
        raise CliError(exc.args[0]) from exc
    expert_run = cfg.task_kwargs.get("expert_run")
    if expert_run is not None and not (Path(str(expert_run)) / "config.json").is_file():
        raise CliError(f"--task-arg expert_run={expert_run}: not a training run directory (no "
                       "config.json); train the expert first with --method nodelay")
    try:
        result = train(cfg, out=args.out, root=args.root, show_progress=not args.no_progress)
    except FileExistsError as exc:
        raise CliError(str(exc)) from exc
    if torch.distributed.is_available() and torch.distributed.is_initialized():  # torchrun
        rank = torch.distributed.get_rank()
        torch.distributed.destroy_process_group()
        if rank != 0:  # rank 0 reports (and alone wrote the run)
            return 0
    final = result.final()
    summary = {"run": str(result.run_dir), "task": cfg.task, "method": cfg.method,
               "delay_steps": cfg.delay_steps, "seed": cfg.seed,
               "iterations": len(result.history), "env_steps": result.env_steps,
               "wall_s": round(result.wall_s, 2), "sps": final.get("sps"),
               "return_mean": final.get("return_mean"),
               "success_rate": final.get("success_rate")}
    if args.json:
        print_json(summary)
    else:
        print_table([{"key": k, "value": v} for k, v in summary.items()],
                    title=f"edgerl train {cfg.task} {cfg.method}")
    return 0
