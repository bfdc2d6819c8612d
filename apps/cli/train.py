"""``edgerl train``: train one method on one task with rsl-rl-lib PPO."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from edgerl.apps.cli import flags
from edgerl.contract.methods import LEARNED_METHODS, OPEN_LOOP_METHODS

HELP = (f"train a latency-aware policy ({'/'.join(LEARNED_METHODS)}) or set up a "
        f"{'/'.join(OPEN_LOOP_METHODS)} baseline")


#: TrainConfig fields exposed as flags, in ``--help`` order (edgerl.apps.cli.config_flags)
CONFIG_FLAGS = ("method", "delay_steps", "seed", "num_envs", "iterations", "num_steps_per_env",
                "ppo.learning_rate", "ppo.num_mini_batches", "device", "planner", "horizon",
                "period_steps", "residual_bound", "edit_inputs", "privileged", "stop_at_success",
                "trigger", "intent_dim", "planner_prefix", "distill.rounds", "guard.episodes",
                "smooth_weight")
#: Flags named other than their field.
FLAG_NAMES = {"num_steps_per_env": "steps-per-env", "ppo.num_mini_batches": "mini-batches",
              "distill.rounds": "warm-start-rounds", "guard.episodes": "guard-episodes"}
#: Fields whose flag, left unset, takes the task's tuned value (edgerl.policies.task_defaults).
TASK_DEFAULTED = ("num_envs", "num_steps_per_env", "ppo.learning_rate", "ppo.num_mini_batches")
_TASK_DEFAULT_TEXT = ("the task's, edgerl.policies.task_defaults; {field_default} for untuned "
                      "tasks on the CPU")


def config_flag_specs() -> dict[str, Any]:
    """Keyword arguments of :func:`add_dataclass_flags` for ``edgerl train`` (imports no torch:
    ``edgerl --help`` runs on a runtime-only install)."""
    from edgerl.policies.config import TrainConfig

    return {"cls": TrainConfig, "include": CONFIG_FLAGS, "names": FLAG_NAMES,
            "defaults": {"method": "edit", **{k: None for k in TASK_DEFAULTED}},
            "default_text": {k: _TASK_DEFAULT_TEXT for k in TASK_DEFAULTED}}


def add_arguments(p: argparse.ArgumentParser) -> None:
    from edgerl.apps.cli.config_flags import add_dataclass_flags

    p.add_argument("task", help="registered task name (see `edgerl tasks`)")
    add_dataclass_flags(p, **config_flag_specs())
    flags.add_compute_flags(p, threads=(1, "torch CPU threads (default 1: small MLPs run "
                                           "fastest single-threaded)"))
    p.add_argument("--latency-model", type=Path, default=None, metavar="FILE",
                   help="train with a measured planner delay: a latency model file (from "
                        "`bench planner --write-latency-model`, `deploy/hil "
                        "--write-latency-model`) or a deploy MCAP recording (.mcap)")
    p.add_argument("--task-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="extra task factory argument (repeatable; VALUE parsed as JSON when it "
                        "can be), e.g. --task-arg expert_run=runs/gym:Pendulum-v1__nodelay__...")
    out = flags.add_output_flags(p, json="the summary as JSON")
    out.add_argument("--out", default=None, help="run directory (default runs/{task}__...)")
    out.add_argument("--root", default="runs", help="parent of auto-named runs (default runs)")
    out.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def parse_task_args(items: list[str]) -> dict:
    """``["k=v", ...]`` -> ``{"k": json-or-string v}`` (CliError on a malformed item)."""
    import json

    from edgerl.apps.cli.errors import CliError

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

    from edgerl.apps.cli.errors import CliError

    try:
        dev = torch.device(device)
    except RuntimeError as exc:
        raise CliError(f"--device {device!r}: {exc}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise CliError(f"--device {device}: CUDA is not available (torch {torch.__version__}, "
                       f"CUDA build {torch.version.cuda or 'none'}); use --device cpu")


def config_from_args(args: argparse.Namespace):
    """The :class:`TrainConfig` the flags describe (errors become CliError): the generated
    flags' values, the task's defaults for those left unset, the measured latency model and
    the ``--task-arg`` items."""
    from edgerl.apps.cli.config_flags import dataclass_flags, flag_values, replace_paths
    from edgerl.apps.cli.errors import CliError
    from edgerl.contract.serde import SchemaError
    from edgerl.policies.config import TrainConfig
    from edgerl.policies.task_defaults import apply_task_defaults

    flags = dataclass_flags(**config_flag_specs())
    values = flag_values(args, flags)
    for flag in flags:
        value = values[flag.path]
        if flag.path in TASK_DEFAULTED and value is not None and value <= 0:
            raise CliError(f"{flag.flag}: must be > 0, got {value}")
    given = {k: values.pop(k) for k in TASK_DEFAULTED if values[k] is not None}
    values = {k: v for k, v in values.items() if k not in TASK_DEFAULTED}
    nested = {k: values.pop(k) for k in [k for k in values if "." in k]}  # e.g. distill.rounds
    latency = None
    if args.latency_model is not None:
        latency = measured_latency(args.latency_model, args.task, values["period_steps"])
        values["delay_steps"] = values["delay_steps"] or latency.planner_delay_steps
    try:
        cfg = TrainConfig(task=args.task, **values, latency_model=latency,
                          task_kwargs=parse_task_args(args.task_arg))
        # flags left unset take the task's defaults for the device
        return replace_paths(apply_task_defaults(cfg), {**nested, **given})
    except (SchemaError, RuntimeError) as exc:
        raise CliError(str(exc)) from exc


def measured_latency(path: Path, task: str, period_steps: int):
    """The ``LatencyModel`` in ``path`` (latency model JSON or a deploy MCAP recording),
    in control steps of ``task``; CliError when unreadable or measured at another rate."""
    from edgerl.apps.cli.errors import CliError
    from edgerl.contract.serde import SchemaError
    from edgerl.contract.timing import resolve_period
    from edgerl.runtime.planners.latency_record import (
        chunk_latencies_from_recording,
        load_latency_file,
        measure_latency,
    )
    from edgerl.sim.registry import get_task_info

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

    from edgerl.apps.cli.errors import CliError
    from edgerl.apps.cli.output import print_result
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
    print_result(summary, as_json=args.json, key="key",
                 title=f"edgerl train {cfg.task} {cfg.method}")
    return 0
