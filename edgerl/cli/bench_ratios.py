"""``edgerl bench ratios``: every path against its own limit, measured in the same run.

On a shared machine absolute figures say little (the same loop misses 10x more deadlines on
another minute), so each figure here is a ratio to a reference measured beside it:

============================  ====================================================  ========
ratio                         ours / reference                                      target
============================  ====================================================  ========
``sim/<task>``                task ``step`` / raw physics (same backend, threads),   >= 0.75
                              best of interleaved blocks each (MuJoCo tasks)
``train/<task>``              PPO env-steps/s of ``edgerl train`` / rsl-rl-lib's    >= 0.5
                              bare ``OnPolicyRunner`` (same envs, network), pairs
``loop/jitter_p99``           edit-loop wake-up jitter p99 / bare sleep+spin loop   <= 1.5
``loop/miss_rate``            edit-loop deadline-miss rate / bare loop's            <= 1.5
============================  ====================================================  ========

It prints the table, appends one JSON line (UTC time, git revision, load averages before and
after, every ratio and its raw numbers) to ``--history`` and, with ``--png``, redraws the trend
of every ratio over the history. ``make bench`` runs it (``benchmarks/run_all.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

HELP = "ratio of each path to its limit measured in the same run; appends a history line"

#: ratio name prefix -> (target, "min" if the ratio must be >= target else "max").
TARGETS = {"sim": (0.75, "min"), "train": (0.5, "min"), "loop": (1.5, "max")}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sim-tasks", default="arm_reach,arm_push,ball_balance",
                   help="MuJoCo tasks for sim ratios ('' = skip)")
    p.add_argument("--sim-envs", type=int, default=256, help="envs per sim task (default 256)")
    p.add_argument("--sim-steps", type=int, default=20, help="steps per sim block")
    p.add_argument("--sim-repeats", type=int, default=15,
                   help="interleaved (task, raw) blocks; the best of each side is compared")
    p.add_argument("--train-tasks", default="cartpole,ball_balance",
                   help="tasks for the trainer ratio ('' = skip)")
    p.add_argument("--train-envs", type=int, default=64, help="envs per trainer (default 64)")
    p.add_argument("--train-steps-per-env", type=int, default=32)
    p.add_argument("--train-iterations", type=int, default=3, help="PPO iterations per block")
    p.add_argument("--train-repeats", type=int, default=3, help="(ours, bare) pairs")
    p.add_argument("--bundle", type=Path, default=None,
                   help="edit bundle for the loop ratios (none = skip them)")
    p.add_argument("--loop-rate", type=float, default=1000.0)
    p.add_argument("--loop-seconds", type=float, default=10.0, help="seconds per loop block")
    p.add_argument("--loop-pairs", type=int, default=1, help="(bare, loop) pairs")
    p.add_argument("--rt-priority", type=int, default=0,
                   help="SCHED_FIFO priority of both loops (0 = normal scheduling)")
    p.add_argument("--history", type=Path, default=Path("docs/bench_history.jsonl"),
                   help="append one JSON line here ('' = do not)")
    p.add_argument("--png", type=Path, default=None, help="write the trend plot here")
    p.add_argument("--json", action="store_true", help="print the history line as JSON")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _git_rev() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, cwd=Path(__file__).resolve().parents[2])
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def sim_ratios(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``sim/<task>``: task step / raw physics, best of interleaved blocks each
    (:func:`edgerl.sim.overhead.overhead_ratio`)."""
    from edgerl.sim.overhead import overhead_ratio

    out = {}
    for task in [t for t in args.sim_tasks.split(",") if t]:
        row = overhead_ratio(task, args.sim_envs, args.sim_steps, args.sim_repeats)
        out[f"sim/{task}"] = {"ratio": row["ratio"], "ours": row["steps_per_s"],
                              "reference": row["raw_physics_steps_per_s"],
                              "median_pair_ratio": row["median_pair_ratio"],
                              "unit": "env-steps/s", "num_envs": args.sim_envs}
    return out


def train_ratios(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``train/<task>``: our trainer's env-steps/s / rsl-rl-lib's bare runner's."""
    import torch

    from edgerl.policies.throughput import ThroughputCfg, compare

    torch.set_num_threads(1)
    out = {}
    for task in [t for t in args.train_tasks.split(",") if t]:
        row = compare(ThroughputCfg(task=task, num_envs=args.train_envs,
                                    steps_per_env=args.train_steps_per_env,
                                    iterations=args.train_iterations,
                                    repeats=args.train_repeats))
        out[f"train/{task}"] = {"ratio": row["ratio"], "ours": row["ours_steps_per_s"],
                                "reference": row["bare_steps_per_s"], "unit": "env-steps/s",
                                "num_envs": args.train_envs}
    return out


def loop_ratios(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``loop/jitter_p99`` and ``loop/miss_rate``: edit loop / bare sleep+spin loop."""
    if args.bundle is None:
        return {}
    from edgerl.cli.bench_spin import compare

    ns = argparse.Namespace(rate=args.loop_rate, seconds=args.loop_seconds, warmup=0.5,
                            spin_us=300.0, switch_interval_us=200.0,
                            spin_switch_interval_us=5000.0, prewarm_us=150.0,
                            rt_priority=args.rt_priority, work_us=0.0, bundle=args.bundle,
                            pairs=args.loop_pairs, planner_latency_ms=70.0,
                            planner_period_ms=100.0, planner_process=False)
    r = compare(ns)
    return {"loop/jitter_p99": {"ratio": r["jitter_p99_ratio"], "ours": r["loop_jitter_p99_us"],
                                "reference": r["bare_jitter_p99_us"], "unit": "us"},
            "loop/miss_rate": {"ratio": r["miss_rate_ratio"], "ours": r["loop_miss_pct"],
                               "reference": r["bare_miss_pct"], "unit": "%"}}


def meets(name: str, ratio: float) -> bool:
    """Whether ``ratio`` meets its target (:data:`TARGETS` by name prefix)."""
    target, kind = TARGETS[name.split("/", 1)[0]]
    return ratio >= target if kind == "min" else ratio <= target


def append_history(path: Path, line: dict[str, Any]) -> None:
    """Append ``line`` as one JSON line to ``path`` (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fh.write(json.dumps(line, sort_keys=True) + "\n")


def plot_trend(history: Path, png: Path) -> None:
    """Each ratio over the history's runs (x = run index), target lines dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = [json.loads(x) for x in history.read_text().splitlines() if x.strip()]
    names = sorted({n for ln in lines for n in ln.get("ratios", {})})
    fig, axes = plt.subplots(len(names) or 1, 1, figsize=(7, 1.6 * max(1, len(names))),
                             sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], names):
        xs = [i for i, ln in enumerate(lines) if name in ln.get("ratios", {})]
        ax.plot(xs, [lines[i]["ratios"][name]["ratio"] for i in xs], "o-", ms=3)
        ax.axhline(TARGETS[name.split("/", 1)[0]][0], ls="--", c="grey", lw=0.8)
        ax.set_ylabel(name, rotation=0, ha="right", fontsize=8)
    axes[-1, 0].set_xlabel("run (docs/bench_history.jsonl line)")
    fig.suptitle("edgerl: ratio of each path to its limit, same run")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=90)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    from edgerl.cli import CliError
    from edgerl.cli.output import print_json, print_table

    if min(args.sim_envs, args.sim_steps, args.sim_repeats, args.train_envs,
           args.train_steps_per_env, args.train_iterations, args.train_repeats,
           args.loop_pairs) < 1 or not args.loop_seconds > 0:
        raise CliError("sizes, steps, iterations, repeats and pairs must be >= 1 and "
                       "--loop-seconds > 0")
    if args.bundle is not None and not (args.bundle / "manifest.json").is_file():
        raise CliError(f"--bundle {args.bundle}: no manifest.json (not a bundle)")
    load_before, t0 = _load(), time.time()
    ratios: dict[str, dict[str, Any]] = {}
    try:
        ratios.update(sim_ratios(args))
        ratios.update(train_ratios(args))
    except KeyError as exc:
        raise CliError(str(exc.args[0])) from None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    ratios.update(loop_ratios(args))
    line = {"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), "git": _git_rev(),
            "seconds": round(time.time() - t0, 1), "load_before": load_before,
            "load_after": _load(), "ratios": ratios}
    if str(args.history):
        append_history(args.history, line)
        if args.png is not None:
            plot_trend(args.history, args.png)
    if args.json:
        print_json(line)
    else:
        rows = [{"ratio": name, "value": r["ratio"], "ours": r["ours"],
                 "reference": r["reference"], "unit": r["unit"],
                 "target": ("{} {}".format(">=" if TARGETS[name.split('/')[0]][1] == "min"
                                           else "<=", TARGETS[name.split('/')[0]][0])),
                 "met": meets(name, r["ratio"])} for name, r in ratios.items()]
        print_table(rows, title=f"edgerl bench ratios (load {load_before} -> "
                                f"{line['load_after']})")
    return 0
