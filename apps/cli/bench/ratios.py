"""``edgerl bench ratios``: every path against its own limit, measured in the same run.

On a shared machine absolute figures say little (the same loop misses 10x more deadlines on
another minute), so each figure here is a ratio to a reference measured beside it:

============================  ====================================================  ========
ratio                         ours / reference                                      target
============================  ====================================================  ========
``sim/<task>``                task ``step`` / raw physics of the same states (the    >= 0.75
                              task's batch replaying them), best of interleaved
                              blocks each (MuJoCo tasks); ``ratio_from_rest`` beside
``train/<task>``              PPO env-steps/s of ``edgerl train`` / rsl-rl-lib's    >= 0.5
                              bare ``OnPolicyRunner`` (same envs, network), pairs
``loop/jitter_p99``           edit-loop wake-up jitter p99 / bare sleep+spin loop   <= 1.5
``loop/miss_rate``            edit-loop deadline-miss rate / bare loop's, judged    <= 1.5
                              on an exact test of the two counts (below)
``hil/rtt_p99``               ``edgerl hil`` command round trip p99 / ``edgerl      <= 2
                              bench serial --pace-hz`` p99 (the HIL's traffic, same
                              firmware build and priority), median of the pairs
``ros2/e2e_p99``              ``edgerl deploy --trigger state`` state -> command     none
                              p99 / a bare rclpy ``JointState`` round trip p99
                              between two processes, paced at the control rate
``ros2/node_tick_p99``        the edit node's tick compute p99 in that deploy /      none
                              ``edgerl bench loop``'s at the same rate, same bundle
============================  ====================================================  ========

The two ``ros2`` rows have no target; they are reported and plotted, and ``met`` is
``null``.

The miss rate is a count of 0-10 events per 10,000 ticks on this machine, so its ratio is
not judged on the point value: :func:`edgerl.bench.count_ratio.rate_ratio_test` tests the pooled
counts (misses, ticks) of both sides, and the row is met when the edit loop's rate is not
significantly above 1.5x the bare loop's (one-sided exact conditional binomial test at
``--miss-alpha``); ``low`` / ``high`` are the one-sided confidence bounds of the ratio and
``verdict`` says whether the counts show it below the target, above it, or neither.

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
TARGETS: dict[str, tuple[float | None, str]] = {
    "sim": (0.75, "min"), "train": (0.5, "min"), "loop": (1.5, "max"), "hil": (2.0, "max"),
    "ros2": (None, "max")}


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
    p.add_argument("--loop-pairs", type=int, default=1,
                   help="(bare, loop) pairs (0 = skip the loop rows)")
    p.add_argument("--loop-cpus", default="",
                   help="CPUs for both loops' threads, e.g. 1 (default: not pinned)")
    p.add_argument("--planner-cpus", default="",
                   help="CPUs for the edit loop's planner (default: not pinned)")
    p.add_argument("--planner-process", action="store_true",
                   help="run the loop rows' burn planner in its own process (default: a thread "
                        "of the loop's process)")
    p.add_argument("--rt-priority", type=int, default=0,
                   help="SCHED_FIFO priority of both loops (0 = normal scheduling)")
    p.add_argument("--miss-alpha", type=float, default=0.05,
                   help="level of the miss-rate test (one-sided; default 0.05)")
    p.add_argument("--hil-runs", type=int, default=1,
                   help="(paced bench serial, bench serial, hil) sets for hil/rtt_p99 (0 = skip)")
    p.add_argument("--hil-target", choices=("host", "qemu-m4"), default="host",
                   help="firmware build of the hil row (host: make -C firmware)")
    p.add_argument("--hil-rt-priority", type=int, default=10,
                   help="SCHED_FIFO priority of the hil row's processes (firmware +1; 0 = off)")
    p.add_argument("--hil-episodes", type=int, default=2, help="hil episodes per set")
    p.add_argument("--hil-max-steps", type=int, default=250, help="hil steps per episode")
    p.add_argument("--ros2-seconds", type=float, default=10.0,
                   help="seconds of the deploy and of the bench loop behind the ros2 rows "
                        "(needs --bundle and rclpy; 0 = skip)")
    p.add_argument("--history", type=lambda v: Path(v) if v else None,
                   default=Path("docs/bench_history.jsonl"),
                   help="append one JSON line here ('' = do not)")
    p.add_argument("--png", type=Path, default=None, help="write the trend plot here")
    p.add_argument("--json", action="store_true", help="print the history line as JSON")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _git_rev() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, cwd=Path(__file__).resolve().parents[3])
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def sim_ratios(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``sim/<task>``: task step / raw physics, best of interleaved blocks each
    (:func:`edgerl.bench.sim.overhead.overhead_ratio`)."""
    from edgerl.bench.sim.overhead import overhead_ratio

    out = {}
    for task in [t for t in args.sim_tasks.split(",") if t]:
        row = overhead_ratio(task, args.sim_envs, args.sim_steps, args.sim_repeats)
        out[f"sim/{task}"] = {"ratio": row["ratio"], "ours": row["steps_per_s"],
                              "reference": row["raw_physics_steps_per_s"],
                              "median_pair_ratio": row["median_pair_ratio"],
                              "ratio_from_rest": row["ratio_from_rest"],
                              "unit": "env-steps/s", "num_envs": args.sim_envs}
    return out


def train_ratios(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``train/<task>``: our trainer's env-steps/s / rsl-rl-lib's bare runner's."""
    import torch

    from edgerl.bench.train.throughput import ThroughputCfg, compare

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
    if args.bundle is None or args.loop_pairs == 0:
        return {}
    from edgerl.apps.cli.bench.spin import compare

    ns = argparse.Namespace(rate=args.loop_rate, seconds=args.loop_seconds, warmup=0.5,
                            spin_us=300.0, switch_interval_us=200.0,
                            spin_switch_interval_us=5000.0, prewarm_us=150.0,
                            rt_priority=args.rt_priority, work_us=0.0, bundle=args.bundle,
                            pairs=args.loop_pairs, planner_latency_ms=70.0,
                            planner_period_ms=100.0, planner_process=args.planner_process,
                            loop_cpus=args.loop_cpus, planner_cpus=args.planner_cpus)
    r = compare(ns)
    pinned = {"loop_cpus": args.loop_cpus, "planner_cpus": args.planner_cpus,
              "planner_mode": "process" if args.planner_process else "thread"}
    return {"loop/jitter_p99": {"ratio": r["jitter_p99_ratio"], "ours": r["loop_jitter_p99_us"],
                                "reference": r["bare_jitter_p99_us"], "unit": "us", **pinned},
            "loop/miss_rate": {**miss_rate_row(r, args.miss_alpha), **pinned,
                               # per pair, to see whether the misses cluster in one block
                               "pair_misses": [[b["loop"]["deadline_misses"],
                                                b["bare"]["deadline_misses"]]
                                               for b in r["blocks"]],
                               # bursts (misses within 100 ticks are one host event): the
                               # test above counts ticks as independent, a burst is not
                               "pair_bursts": [[b["loop"]["miss_bursts"],
                                                b["bare"]["miss_bursts"]]
                                               for b in r["blocks"]]}}


def miss_rate_row(r: dict[str, Any], alpha: float = 0.05) -> dict[str, Any]:
    """The ``loop/miss_rate`` row from pooled counts ``r`` (``loop_misses``, ``loop_ticks``,
    ``bare_misses``, ``bare_ticks``: :func:`edgerl.apps.cli.bench.spin.compare`): the corrected
    rate ratio, its one-sided bounds and the test against the 1.5x target
    (:func:`edgerl.bench.count_ratio.rate_ratio_test`); ``ours`` / ``reference`` are the rates in
    %."""
    from edgerl.bench.count_ratio import rate_ratio_test

    t = rate_ratio_test(r["loop_misses"], r["loop_ticks"], r["bare_misses"], r["bare_ticks"],
                        limit=TARGETS["loop"][0], alpha=alpha).as_dict()
    return {"ratio": t.pop("ratio"), "ours": round(100.0 * t["k1"] / t["n1"], 4),
            "reference": round(100.0 * t["k2"] / t["n2"], 4), "unit": "%", **t}


def hil_ratios(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``hil/rtt_p99``: ``--hil-runs`` sets of :func:`edgerl.bench.hil.rt_ratio.pair`."""
    if args.hil_runs == 0:
        return {}
    from edgerl.bench.hil.rt_ratio import pair

    sets = [pair(args.hil_rt_priority, 2000, args.hil_episodes, args.hil_target,
                 args.hil_max_steps) for _ in range(args.hil_runs)]
    return {"hil/rtt_p99": hil_row(sets)}


def hil_row(sets: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``hil/rtt_p99`` row from :func:`edgerl.bench.hil.rt_ratio.pair` sets: the median of the
    per-set ratios (hil p99 / paced bench serial p99), the medians of both p99s, and per set
    the ratio, the back-to-back ratio and the other processes' RT threads seen."""
    import statistics

    from edgerl.bench.hil.rt_ratio import summarize

    if not sets:
        raise ValueError("hil_row needs at least one set")
    s = summarize(sets)
    return {"ratio": round(s["median_ratio"], 3),
            "ours": statistics.median(r["hil_p99_us"] for r in sets),
            "reference": statistics.median(r["bench_paced_p99_us"] for r in sets),
            "unit": "us", "sets": s["runs"], "sets_met": s["met"], "set_ratios": s["ratios"],
            "set_ratios_b2b": s["ratios_b2b"], "firmware_target": sets[0]["target"],
            "rt_priority": sets[0]["rt_priority"], "rt_granted": [r["rt_granted"] for r in sets],
            "other_rt": [len(r["other_rt"]) for r in sets]}


def ros2_ratios(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``ros2/e2e_p99`` and ``ros2/node_tick_p99`` (:func:`ros2_rows`): an rclpy round trip
    paced at the bundle's control rate, ``edgerl deploy --trigger state`` and ``edgerl bench
    loop``, one after the other, ``--ros2-seconds`` each. Skipped without ``--bundle``, with
    ``--ros2-seconds 0``, or (logged) when rclpy is not installed."""
    if args.bundle is None or args.ros2_seconds == 0:
        return {}
    import importlib.util
    import logging

    if importlib.util.find_spec("rclpy") is None:
        logging.getLogger(__name__).warning("ros2 rows skipped: rclpy is not installed")
        return {}
    from edgerl_ros.roundtrip import measure

    from edgerl.bench.child_json import edgerl_json
    from edgerl.contract.spec import load_bundle_manifest

    hz = float(load_bundle_manifest(args.bundle).control_hz)
    rtt = measure(n=max(50, int(args.ros2_seconds * hz)), period_s=1.0 / hz)
    deploy = edgerl_json(["deploy", "--bundle", str(args.bundle), "--trigger", "state",
                           "--duration", str(args.ros2_seconds)], ok_codes=(0, 2))
    loop = edgerl_json(["bench", "loop", "--bundle", str(args.bundle), "--rate", str(hz),
                         "--seconds", str(args.ros2_seconds)])
    return ros2_rows(rtt, deploy, loop)


def ros2_rows(rtt: dict[str, Any], deploy: dict[str, Any],
              loop: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The two ros2 rows from a round trip (:func:`edgerl_ros.roundtrip.measure`), an
    ``edgerl deploy --json`` summary and an ``edgerl bench loop --json`` summary (all in us).
    ``ValueError`` naming the field when one is missing or not positive."""
    def value(src: dict[str, Any], key: str, what: str) -> float:
        v = src.get(key)
        if not isinstance(v, (int, float)) or not v > 0:
            raise ValueError(f"ros2 rows: {what} has no positive {key} (got {v!r})")
        return float(v)

    e2e = value(deploy, "e2e_latency_p99_us", "edgerl deploy")
    ref = value(rtt, "rtt_p99_us", "the rclpy round trip")
    node = value(deploy, "edit_tick_compute_p99_us", "edgerl deploy")
    bench = value(loop, "tick_compute_p99_us", "edgerl bench loop")
    return {"ros2/e2e_p99": {"ratio": round(e2e / ref, 3), "ours": e2e, "reference": ref,
                             "unit": "us", "ours_p50": deploy.get("e2e_latency_p50_us"),
                             "reference_p50": rtt.get("rtt_p50_us"), "trigger": "state",
                             "round_trips": rtt.get("n")},
            "ros2/node_tick_p99": {"ratio": round(node / bench, 3), "ours": node,
                                   "reference": bench, "unit": "us",
                                   "ours_p50": deploy.get("edit_tick_compute_p50_us"),
                                   "reference_p50": loop.get("tick_compute_p50_us")}}


def meets(name: str, row: float | dict[str, Any]) -> bool | None:
    """Whether a ratio (or a row with ``ratio``) meets its target (:data:`TARGETS` by name
    prefix); a row that carries its own test verdict (``met``: the miss-rate row) keeps it;
    ``None`` for a row without a target (``ros2``)."""
    if isinstance(row, dict):
        if "met" in row:
            return row["met"] if row["met"] is None else bool(row["met"])
        row = row["ratio"]
    target, kind = TARGETS[name.split("/", 1)[0]]
    if target is None:
        return None
    return row >= target if kind == "min" else row <= target


def _target_text(name: str) -> str:
    target, kind = TARGETS[name.split("/", 1)[0]]
    return "none" if target is None else f"{'>=' if kind == 'min' else '<='} {target}"


def _bounds(r: dict[str, Any]) -> str:
    """``"low-high"`` of a row with confidence bounds (high ``None`` = unbounded), else ``""``."""
    if "low" not in r:
        return ""
    return f"{r['low']:.3g}-" + ("inf" if r["high"] is None else f"{r['high']:.3g}")


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
        target = TARGETS[name.split("/", 1)[0]][0]
        if target is not None:
            ax.axhline(target, ls="--", c="grey", lw=0.8)
        ax.set_ylabel(name, rotation=0, ha="right", fontsize=8)
    axes[-1, 0].set_xlabel("run (docs/bench_history.jsonl line)")
    fig.suptitle("edgerl: ratio of each path to its limit, same run")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=90)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.errors import CliError
    from edgerl.apps.cli.output import print_json, print_table

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
    try:
        ratios.update(hil_ratios(args))
    except RuntimeError as exc:  # an edgerl bench serial / hil subprocess failed
        raise CliError(f"hil/rtt_p99: {exc}") from None
    try:
        ratios.update(ros2_ratios(args))
    except (RuntimeError, ValueError) as exc:  # a deploy / bench loop / round trip failed
        raise CliError(f"ros2 rows: {exc}") from None
    for name, r in ratios.items():
        r["met"] = meets(name, r)
    line = {"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), "git": _git_rev(),
            "seconds": round(time.time() - t0, 1), "load_before": load_before,
            "load_after": _load(), "ratios": ratios}
    if args.history is not None:
        append_history(args.history, line)
        if args.png is not None:
            plot_trend(args.history, args.png)
    if args.json:
        print_json(line)
    else:
        rows = [{"ratio": name, "value": r["ratio"], "ours": r["ours"],
                 "reference": r["reference"], "unit": r["unit"],
                 "target": _target_text(name), "bounds": _bounds(r),
                 "met": "-" if r["met"] is None else r["met"]} for name, r in ratios.items()]
        print_table(rows, title=f"edgerl bench ratios (load {load_before} -> "
                                f"{line['load_after']})")
    return 0
