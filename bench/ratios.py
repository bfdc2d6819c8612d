"""Every path against its own limit, measured in the same run (``edgerl bench ratios``).

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
``miss_alpha``); ``low`` / ``high`` are the one-sided confidence bounds of the ratio and
``verdict`` says whether the counts show it below the target, above it, or neither.

:func:`measure_ratios` returns one JSON line (UTC time, git revision, load averages before and
after, every ratio and its raw numbers), appends it to ``history`` and, with ``png``, redraws
the trend of every ratio over the history. ``make bench`` runs it (:mod:`edgerl.bench.suite`).
What it measures: :class:`~edgerl.bench.ratios_config.RatiosConfig`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from edgerl.bench.ratio_history import (
    append_history,
    plot_trend,
    record_ratios,
    recorded_lines,
)
from edgerl.bench.ratios_config import RatiosConfig
from edgerl.contract.errors import UserError

__all__ = ["TARGETS", "RatiosConfig", "bounds", "hil_row", "measure_ratios", "meets",
           "miss_rate_row", "ros2_rows", "target_text"]

#: ratio name prefix -> (target, "min" if the ratio must be >= target else "max").
TARGETS: dict[str, tuple[float | None, str]] = {
    "sim": (0.75, "min"), "train": (0.5, "min"), "loop": (1.5, "max"), "hil": (2.0, "max"),
    "ros2": (None, "max")}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _git_rev() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, cwd=Path(__file__).resolve().parents[1])
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def sim_ratios(cfg: RatiosConfig) -> dict[str, dict[str, Any]]:
    """``sim/<task>``: task step / raw physics, best of interleaved blocks each
    (:func:`edgerl.bench.sim.overhead.overhead_ratio`)."""
    from edgerl.bench.sim.overhead import overhead_ratio

    sim, out = cfg.sim, {}
    for task in sim.tasks:
        row = overhead_ratio(task, sim.envs, sim.steps, sim.repeats)
        out[f"sim/{task}"] = {"ratio": row["ratio"], "ours": row["steps_per_s"],
                              "reference": row["raw_physics_steps_per_s"],
                              "median_pair_ratio": row["median_pair_ratio"],
                              "ratio_from_rest": row["ratio_from_rest"],
                              "unit": "env-steps/s", "num_envs": sim.envs}
    return out


def train_ratios(cfg: RatiosConfig) -> dict[str, dict[str, Any]]:
    """``train/<task>``: our trainer's env-steps/s / rsl-rl-lib's bare runner's."""
    import torch

    from edgerl.bench.train.throughput import ThroughputCfg, compare

    torch.set_num_threads(1)
    train, out = cfg.train, {}
    for task in train.tasks:
        row = compare(ThroughputCfg(task=task, num_envs=train.envs,
                                    steps_per_env=train.steps_per_env,
                                    iterations=train.iterations, repeats=train.repeats))
        out[f"train/{task}"] = {"ratio": row["ratio"], "ours": row["ours_steps_per_s"],
                                "reference": row["bare_steps_per_s"], "unit": "env-steps/s",
                                "num_envs": train.envs}
    return out


def loop_ratios(cfg: RatiosConfig) -> dict[str, dict[str, Any]]:
    """``loop/jitter_p99`` and ``loop/miss_rate``: edit loop / bare sleep+spin loop."""
    if cfg.bundle is None or cfg.loop.pairs == 0:
        return {}
    from edgerl.bench.loop.spin import compare

    loop = cfg.loop
    r = compare(replace(loop, bundle=cfg.bundle))
    pinned = {"loop_cpus": loop.loop_cpus, "planner_cpus": loop.planner_cpus,
              "planner_mode": "process" if loop.planner_process else "thread"}
    return {"loop/jitter_p99": {"ratio": r["jitter_p99_ratio"], "ours": r["loop_jitter_p99_us"],
                                "reference": r["bare_jitter_p99_us"], "unit": "us", **pinned},
            "loop/miss_rate": {**miss_rate_row(r, cfg.miss_alpha), **pinned,
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
    ``bare_misses``, ``bare_ticks``: :func:`edgerl.bench.loop.spin.compare`): the corrected
    rate ratio, its one-sided bounds and the test against the 1.5x target
    (:func:`edgerl.bench.count_ratio.rate_ratio_test`); ``ours`` / ``reference`` are the rates in
    %."""
    from edgerl.bench.count_ratio import rate_ratio_test

    t = rate_ratio_test(r["loop_misses"], r["loop_ticks"], r["bare_misses"], r["bare_ticks"],
                        limit=TARGETS["loop"][0], alpha=alpha).as_dict()
    return {"ratio": t.pop("ratio"), "ours": round(100.0 * t["k1"] / t["n1"], 4),
            "reference": round(100.0 * t["k2"] / t["n2"], 4), "unit": "%", **t}


def hil_ratios(cfg: RatiosConfig) -> dict[str, dict[str, Any]]:
    """``hil/rtt_p99``: ``hil.runs`` sets of :func:`edgerl.bench.hil.rt_ratio.pair`."""
    hil = cfg.hil
    if hil.runs == 0:
        return {}
    from edgerl.bench.hil.rt_ratio import pair

    sets = [pair(hil.rt_priority, 2000, hil.episodes, hil.target, hil.max_steps)
            for _ in range(hil.runs)]
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


def ros2_ratios(cfg: RatiosConfig) -> dict[str, dict[str, Any]]:
    """``ros2/e2e_p99`` and ``ros2/node_tick_p99`` (:func:`ros2_rows`): an rclpy round trip
    paced at the bundle's control rate, ``edgerl deploy --trigger state`` and ``edgerl bench
    loop``, one after the other, ``ros2_seconds`` each. Skipped without a bundle, with
    ``ros2_seconds=0``, or (logged) when rclpy is not installed."""
    if cfg.bundle is None or cfg.ros2_seconds == 0:
        return {}
    import importlib.util
    import logging

    if importlib.util.find_spec("rclpy") is None:
        logging.getLogger(__name__).warning("ros2 rows skipped: rclpy is not installed")
        return {}
    from edgerl_ros.roundtrip import measure

    from edgerl.bench.child_json import edgerl_json
    from edgerl.contract.spec import load_bundle_manifest

    hz = float(load_bundle_manifest(cfg.bundle).control_hz)
    rtt = measure(n=max(50, int(cfg.ros2_seconds * hz)), period_s=1.0 / hz)
    deploy = edgerl_json(["deploy", "--bundle", str(cfg.bundle), "--trigger", "state",
                           "--duration", str(cfg.ros2_seconds)], ok_codes=(0, 2))
    loop = edgerl_json(["bench", "loop", "--bundle", str(cfg.bundle), "--rate", str(hz),
                         "--seconds", str(cfg.ros2_seconds)])
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


def target_text(name: str) -> str:
    target, kind = TARGETS[name.split("/", 1)[0]]
    return "none" if target is None else f"{'>=' if kind == 'min' else '<='} {target}"


def bounds(r: dict[str, Any]) -> str:
    """``"low-high"`` of a row with confidence bounds (high ``None`` = unbounded), else ``""``."""
    if "low" not in r:
        return ""
    return f"{r['low']:.3g}-" + ("inf" if r["high"] is None else f"{r['high']:.3g}")


def measure_ratios(cfg: RatiosConfig) -> dict[str, Any]:
    """Every row ``cfg`` asks for, each with ``met`` (:func:`meets`), in one JSON line (UTC
    time, git revision, seconds, load averages before and after, ``ratios``); appended to
    ``cfg.history``, recorded in ``cfg.record`` and plotted to ``cfg.png`` when set. A
    measurement that fails is a ``UserError`` naming its row."""
    load_before, t0 = _load(), time.time()
    ratios: dict[str, dict[str, Any]] = {}
    try:
        ratios.update(sim_ratios(cfg))
        ratios.update(train_ratios(cfg))
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    except ValueError as exc:
        raise UserError(str(exc)) from None
    ratios.update(loop_ratios(cfg))
    try:
        ratios.update(hil_ratios(cfg))
    except RuntimeError as exc:  # an edgerl bench serial / hil subprocess failed
        raise UserError(f"hil/rtt_p99: {exc}") from None
    try:
        ratios.update(ros2_ratios(cfg))
    except (RuntimeError, ValueError) as exc:  # a deploy / bench loop / round trip failed
        raise UserError(f"ros2 rows: {exc}") from None
    for name, r in ratios.items():
        r["met"] = meets(name, r)
    line = {"utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), "git": _git_rev(),
            "seconds": round(time.time() - t0, 1), "load_before": load_before,
            "load_after": _load(), "ratios": ratios}
    if cfg.history is not None:
        append_history(cfg.history, line)
    if cfg.record is not None:
        record_ratios(cfg.record, line)
    if cfg.png is not None and cfg.record is not None:
        plot_trend(recorded_lines(cfg.record), cfg.png, "run (recorded in the results store)",
                   TARGETS)
    elif cfg.png is not None and cfg.history is not None:
        lines = [json.loads(x) for x in cfg.history.read_text().splitlines() if x.strip()]
        plot_trend(lines, cfg.png, f"run ({cfg.history} line)", TARGETS)
    return line
