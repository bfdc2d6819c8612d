"""The headline benchmarks quoted in docs/benchmarks.md, in one run (``edgerl bench all``,
``make bench``).

Builds the benchmark bundle once (a cartpole ``edit`` policy: 60 PPO iterations, planner
delay 3 steps, exported with parity) under ``runs/bench/``, then prints the ratio of each path
to its limit measured in the same run (``edgerl bench ratios``: records the run in the
results store, ``experiments/runtime-timing``, and redraws ``docs/img/bench_trend.png``),
then runs each
``edgerl bench`` target with ``--json`` and returns one summary row per target; the raw JSON
of every run goes to ``runs/bench/results.json``. The real-time loop benchmarks use
``--rt-priority 50`` (SCHED_FIFO; needs root or CAP_SYS_NICE) as docs/benchmarks.md does. The
ratios include the ``hil/rtt_p99`` row (one HIL set on the host firmware, ~30 s). A full run
takes a few minutes, ``quick`` (short runs) about one.

Every step is an ``edgerl`` command run in its own process (``python -m edgerl.apps``), so one
benchmark's threads, priorities or rclpy context never leak into the next; :func:`plan` lists
them without running anything (``edgerl bench all --dry-run``).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgerl.contract.errors import UserError

__all__ = ["SuiteConfig", "Target", "bundle_commands", "ensure_bundle", "plan", "ratios_argv",
           "run_suite", "targets"]

log = logging.getLogger(__name__)

EDGERL = [sys.executable, "-m", "edgerl.apps"]

Summary = Callable[[dict[str, Any]], tuple[str, str]]


@dataclass(frozen=True)
class SuiteConfig:
    """One ``make bench`` run.

    Attributes:
        quick: Short runs (a smoke check) instead of the documented durations.
        ratios_only: Only ``edgerl bench ratios`` (skip the absolute figures).
        out: Where the bundle is built and ``results.json`` written (relative to the
            working directory, like the two files below).
        store: The results store the ratios run is recorded in (``experiments/``).
        trend_png: The ratios' trend plot, redrawn from the recorded runs.
    """

    quick: bool = False
    ratios_only: bool = False
    out: Path = Path("runs/bench")
    store: Path = Path("experiments")
    trend_png: Path = Path("docs/img/bench_trend.png")

    @property
    def bundle(self) -> Path:
        return self.out / "bundle"


@dataclass(frozen=True)
class Target:
    """One absolute figure: ``edgerl ARGV --json`` and how its JSON reads in the summary.

    Attributes:
        name: The summary row's name.
        argv: ``edgerl`` arguments (without ``--json``).
        summarize: The result JSON -> ``(value, acceptance)`` texts of the row.
    """

    name: str
    argv: tuple[str, ...]
    summarize: Summary


def _sim_driving(r: dict[str, Any]) -> tuple[str, str]:
    return (f"{r['steps_per_s'] / 1e6:.2f}M env-steps/s = policy-controlled agent-steps/s "
            f"({r['agent_steps_per_s'] / 1e6:.2f}M vehicle-steps/s, {r['agents_per_env']} "
            f"vehicles/env)", "floor 0.5M env-steps/s")


def _sim_mujoco(digits: int, floor: str) -> Summary:
    """The summary of a MuJoCo sim target: thousands of env-steps/s to ``digits`` decimals,
    both overhead ratios, and the acceptance text ``floor``."""
    def summarize(r: dict[str, Any]) -> tuple[str, str]:
        return (f"{r['steps_per_s'] / 1e3:.{digits}f}k env-steps/s, "
                f"{r['overhead_ratio_same_states']:.2f} x raw (same states), "
                f"{r['overhead_ratio']:.2f} x raw from rest", floor)
    return summarize


def _loop(r: dict[str, Any]) -> tuple[str, str]:
    return (f"compute p99 {r['tick_compute_p99_us']:.0f} us, jitter p99 "
            f"{r['jitter_p99_us']:.1f} us, misses {r['deadline_misses']}/{r['ticks']}",
            "150 us, 50 us, 0.1 %")


def _serial(r: dict[str, Any]) -> tuple[str, str]:
    return f"p50 {r['cmd_rtt_p50_us']:.0f} us, p99 {r['cmd_rtt_p99_us']:.0f} us", "p99 1 ms"


def _planner(r: dict[str, Any]) -> tuple[str, str]:
    return (f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, "
            f"{r['throughput_rps']:.0f} req/s (loopback)", "report")


def bundle_commands(cfg: SuiteConfig) -> list[list[str]]:
    """``edgerl`` arguments that train and export the benchmark bundle into ``cfg.bundle``."""
    run_dir = cfg.out / "edit_run"
    return [["train", "cartpole", "--method", "edit", "--delay-steps", "3", "--iterations", "60",
             "--out", str(run_dir), "--no-progress"],
            ["export", str(run_dir), "--out", str(cfg.bundle)]]


def ratios_argv(cfg: SuiteConfig) -> list[str]:
    """``edgerl bench ratios`` arguments: every path as a ratio to its limit measured in the
    same run, recorded in the results store and the trend PNG redrawn."""
    argv = ["bench", "ratios", "--bundle", str(cfg.bundle), "--rt-priority", "50",
            "--record", str(cfg.store), "--png", str(cfg.trend_png)]
    if cfg.quick:
        argv += ["--sim-repeats", "5", "--train-iterations", "2", "--train-repeats", "1",
                 "--loop-seconds", "5", "--hil-episodes", "1", "--ros2-seconds", "3"]
    return argv


def targets(cfg: SuiteConfig) -> list[Target]:
    """The absolute figures of docs/benchmarks.md' headline table, in order."""
    seconds = "5" if cfg.quick else "30"
    loop = ("--bundle", str(cfg.bundle), "--planner", "burn", "--planner-latency-ms", "70",
            "--planner-period-ms", "100", "--seconds", seconds, "--rt-priority", "50")
    return [
        Target("sim driving 4096 envs", ("bench", "sim", "--task", "driving", "--num-envs",
                                         "4096", "--threads", "1"), _sim_driving),
        Target("sim arm_reach 256 envs", ("bench", "sim", "--task", "arm_reach", "--num-envs",
                                          "256"),
               _sim_mujoco(0, "floor 100k, 0.5 x raw")),
        Target("sim ball_balance 256 envs", ("bench", "sim", "--task", "ball_balance",
                                             "--num-envs", "256"),
               _sim_mujoco(1, "floor 0.5 x raw")),
        Target("loop 1 kHz, planner thread", ("bench", "loop", *loop, "--rate", "1000"), _loop),
        Target("loop 500 Hz, planner process", ("bench", "loop", *loop, "--rate", "500",
                                                "--planner-process"), _loop),
        Target("serial pty round trip", ("bench", "serial", "--count",
                                         "1000" if cfg.quick else "5000", "--rt-priority", "10"),
               _serial),
        Target("planner (language)", ("bench", "planner", "--requests",
                                      "50" if cfg.quick else "200"), _planner),
    ]


def plan(cfg: SuiteConfig) -> list[list[str]]:
    """Every ``edgerl`` command :func:`run_suite` runs, in order: the bundle's (only while
    ``cfg.bundle`` has no manifest.json), the ratios, then each target with ``--json``."""
    steps = [] if (cfg.bundle / "manifest.json").is_file() else bundle_commands(cfg)
    steps.append(ratios_argv(cfg))
    if not cfg.ratios_only:
        steps += [[*t.argv, "--json"] for t in targets(cfg)]
    return steps


def _run_json(argv: list[str], timeout: float = 900.0) -> dict[str, Any]:
    """``edgerl ARGV --json``'s printed JSON; ``UserError`` (the end of its stderr logged)
    when it fails."""
    res = subprocess.run([*EDGERL, *argv, "--json"], capture_output=True, text=True,
                         timeout=timeout)
    if res.returncode != 0:
        log.error("%s", res.stderr[-3000:])
        raise UserError(f"benchmark failed (exit {res.returncode}): edgerl {' '.join(argv)}")
    return json.loads(res.stdout)


def _run(argv: list[str], quiet: bool) -> None:
    """``edgerl ARGV`` (its output hidden when ``quiet``); ``UserError`` when it fails."""
    try:
        subprocess.run([*EDGERL, *argv], check=True,
                       stdout=subprocess.DEVNULL if quiet else None)
    except subprocess.CalledProcessError as exc:
        raise UserError(f"benchmark step failed (exit {exc.returncode}): "
                        f"edgerl {' '.join(argv)}") from None


def ensure_bundle(cfg: SuiteConfig) -> Path:
    """The cartpole edit bundle the loop benchmarks run (trained and exported once)."""
    if not (cfg.bundle / "manifest.json").is_file():
        cfg.out.mkdir(parents=True, exist_ok=True)
        for argv in bundle_commands(cfg):
            _run(argv, quiet=True)
    return cfg.bundle


def run_suite(cfg: SuiteConfig) -> list[dict[str, str]]:
    """Run the suite (see the module docstring); returns one row per target (``benchmark``,
    ``result``, ``acceptance``, ``seconds``), ``[]`` with ``ratios_only``. The ratios'
    table goes to stdout as ``edgerl bench ratios`` prints it."""
    ensure_bundle(cfg)
    _run(ratios_argv(cfg), quiet=False)
    if cfg.ratios_only:
        return []
    rows, raw = [], {}
    for target in targets(cfg):
        t0 = time.perf_counter()
        result = _run_json(list(target.argv))
        raw[target.name] = result
        try:
            value, bound = target.summarize(result)
        except (KeyError, TypeError, ZeroDivisionError) as exc:
            value, bound = f"(see results.json: {exc!r})", ""
        rows.append({"benchmark": target.name, "result": value, "acceptance": bound,
                     "seconds": f"{time.perf_counter() - t0:.0f}"})
        log.info("%s: %s", target.name, value)
    cfg.out.mkdir(parents=True, exist_ok=True)
    (cfg.out / "results.json").write_text(json.dumps(raw, indent=2) + "\n")
    return rows
