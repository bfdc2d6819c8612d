"""The CLI's flags, one named argument group per concern, shared by the verbs.

A verb that takes a bundle, runs a planner beside a loop, asks for real-time scheduling or
prints JSON adds that concern's group here instead of copying its ``add_argument`` calls, so
a flag keeps one name, type, default and wording in every verb (``--help`` shows each group
under its title). The keyword arguments say what differs between verbs: whether a flag is
there, its default, or who it applies to (``scope``: a prefix such as ``"--bundle: "`` for a
flag that only matters with another one).

>>> add_bundle_flags(p, required=True)
>>> add_rt_flags(p, "the loop thread", loop_cpus="the loop thread")
>>> add_compute_flags(p, threads=(1, "torch CPU threads (default 1)"))
>>> add_output_flags(p, json="JSON instead of a table")
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgerl.bench.loop.timing import LoopTiming

__all__ = ["add_bundle_flags", "add_compute_flags", "add_episode_flags", "add_firmware_flags",
           "add_loop_flags", "add_output_flags", "add_planner_flags", "add_rt_flags",
           "loop_timing"]

Group = Any  # argparse's argument group (a private class)
Flag = tuple[Any, str]  # (default, help) of a flag whose default and wording vary by verb


def _group(p: argparse.ArgumentParser, title: str) -> Group:
    """``p``'s argument group titled ``title`` (created on first use, so two helpers of the
    same concern share it)."""
    for group in p._action_groups:
        if group.title == title:
            return group
    return p.add_argument_group(title)


def add_bundle_flags(p: argparse.ArgumentParser, *, required: bool = False,
                     help: str = "bundle directory", backend: bool = False) -> Group:
    """``--bundle DIR`` (a :class:`Path`; ``None`` when optional and not given); with
    ``backend``, ``--backend onnx|numpy`` and ``--device`` (onnxruntime device) to run it."""
    g = _group(p, "bundle")
    g.add_argument("--bundle", required=required, type=Path, default=None, help=help)
    if backend:
        g.add_argument("--backend", choices=("onnx", "numpy"), default="onnx")
        g.add_argument("--device", default="auto", help="auto, cpu, cuda or tensorrt")
    return g


def add_loop_flags(p: argparse.ArgumentParser, *, rate: float | None, seconds: float,
                   seconds_help: str, warmup: float, edit_scope: str = "") -> Group:
    """A fixed-rate loop's timing: ``--rate`` (Hz; ``None`` = the manifest's control_hz),
    ``--seconds`` measured, ``--warmup`` seconds first, ``--spin-us`` busy-wait before each
    deadline, ``--switch-interval-us``, and the edit loop's own ``--spin-switch-interval-us``
    and ``--prewarm-us`` (their help prefixed with ``edit_scope`` where a bare loop runs
    too)."""
    g = _group(p, "loop timing")
    shown = "the manifest's control_hz" if rate is None else f"{rate:g}"
    g.add_argument("--rate", type=float, default=rate, help=f"loop rate in Hz (default: {shown})")
    g.add_argument("--seconds", type=float, default=seconds, help=seconds_help)
    g.add_argument("--warmup", type=float, default=warmup, help="seconds run before measuring")
    g.add_argument("--spin-us", type=float, default=300.0,
                   help="busy-wait this long before each deadline (us)")
    g.add_argument("--switch-interval-us", type=float, default=200.0,
                   help="sys.setswitchinterval while running (us); 0 leaves it alone")
    g.add_argument("--spin-switch-interval-us", type=float, default=5000.0,
                   help=f"{edit_scope}sys.setswitchinterval from each spin's start to the tick's "
                        "end (us): another thread cannot take the GIL inside the window; 0 "
                        "leaves it alone")
    g.add_argument("--prewarm-us", type=float, default=150.0,
                   help=f"{edit_scope}re-run the network this long before each deadline to warm "
                        "caches (us); 0 disables")
    return g


def loop_timing(args: argparse.Namespace) -> LoopTiming:
    """The :class:`~edgerl.bench.loop.timing.LoopTiming` that :func:`add_loop_flags`' and
    :func:`add_rt_flags`' flags parsed into ``args`` say."""
    from edgerl.bench.loop.timing import LoopTiming

    return LoopTiming(rate_hz=args.rate, seconds=args.seconds, warmup_s=args.warmup,
                      spin_us=args.spin_us, switch_interval_us=args.switch_interval_us,
                      spin_switch_interval_us=args.spin_switch_interval_us,
                      prewarm_us=args.prewarm_us, rt_priority=args.rt_priority)


def add_planner_flags(p: argparse.ArgumentParser, *, scope: str = "", choice: bool = False,
                      burn: bool = True, period_ms: float | None = None,
                      process_help: str = "run the planner in a separate process (spawn)"
                      ) -> Group:
    """The planner beside a loop: ``--planner-process``; with ``burn`` the CPU-burning
    stand-in's ``--planner-latency-ms`` and ``--planner-period-ms`` (default ``period_ms``;
    ``None`` = the manifest's chunk.period_s); with ``choice`` also ``--planner`` (which one)
    and ``--planner-gil``. ``scope`` prefixes each help (e.g. ``"--bundle: "``)."""
    g = _group(p, "planner")
    if choice:
        g.add_argument("--planner", choices=("auto", "burn", "onnx", "none"), default="auto",
                       help="auto: the bundle's planner.onnx if present, else the burn stand-in")
    g.add_argument("--planner-process", action="store_true", help=scope + process_help)
    if not burn:
        return g
    g.add_argument("--planner-latency-ms", type=float, default=70.0,
                   help=f"{scope}burn stand-in: CPU time per plan call (ms)")
    shown = "the manifest's chunk.period_s" if period_ms is None else f"{period_ms:g}"
    g.add_argument("--planner-period-ms", type=float, default=period_ms,
                   help=f"{scope}time between plan calls (ms; default: {shown})")
    if choice:
        g.add_argument("--planner-gil", choices=("release", "hold"), default="release",
                       help="burn stand-in: burn with the GIL released (like a model) or held")
    return g


def add_rt_flags(p: argparse.ArgumentParser, who: str, *, top: int = 99,
                 loop_cpus: str | None = None, planner_cpus: str | None = None,
                 planner_scope: str = "", planner_note: str = "", unpinned: str | None = "",
                 unpinned_text: str = "default: not pinned", metavar: str | None = None
                 ) -> Group:
    """Real-time scheduling: ``--rt-priority`` (SCHED_FIFO priority 1..``top`` of ``who``;
    0 = normal scheduling); with ``loop_cpus`` / ``planner_cpus`` (whose threads)
    ``--loop-cpus`` / ``--planner-cpus``, CPU lists such as ``1`` or ``2-3`` whose default
    ``unpinned`` is explained by ``unpinned_text`` (the planner's help prefixed with
    ``planner_scope``, followed by ``planner_note``)."""
    g = _group(p, "real-time")
    g.add_argument("--rt-priority", type=int, default=0, metavar=metavar,
                   help=f"SCHED_FIFO priority (1-{top}) of {who}; 0 = normal scheduling")
    if loop_cpus is not None:
        g.add_argument("--loop-cpus", default=unpinned, metavar="CPUS",
                       help=f"CPUs for {loop_cpus}, e.g. 1 or 2-3 ({unpinned_text})")
    if planner_cpus is not None:
        g.add_argument("--planner-cpus", default=unpinned, metavar="CPUS",
                       help=f"{planner_scope}CPUs for {planner_cpus}, e.g. 0 ({unpinned_text})"
                            f"{planner_note}")
    return g


def add_firmware_flags(p: argparse.ArgumentParser, *, watchdog_ms: int | None,
                       flag: str = "--target", scope: str = "") -> Group:
    """The firmware a run talks to: ``flag`` (``--target``) host or qemu-m4, and with
    ``watchdog_ms`` the firmware watchdog ``--watchdog-ms`` (that default)."""
    g = _group(p, "firmware")
    g.add_argument(flag, choices=("host", "qemu-m4"), default="host",
                   help=f"{scope}firmware: host (POSIX build on a pty, make -C firmware; "
                        "default) or qemu-m4 (Cortex-M4 build in qemu-system-arm -M "
                        "mps2-an386)")
    if watchdog_ms is not None:
        g.add_argument("--watchdog-ms", type=int, default=watchdog_ms,
                       help=f"firmware watchdog (ms, default {watchdog_ms})")
    return g


def add_compute_flags(p: argparse.ArgumentParser, *, threads: Flag | None = None,
                      device: Flag | None = None, device_choices: tuple[str, ...] | None = None
                      ) -> Group:
    """Where the numbers are computed: ``--threads`` (torch or onnxruntime CPU threads) and
    ``--device`` (with ``device_choices``, only those), each given as ``(default, help)``."""
    g = _group(p, "compute")
    if threads is not None:
        g.add_argument("--threads", type=int, default=threads[0], help=threads[1])
    if device is not None:
        g.add_argument("--device", default=device[0], choices=device_choices, help=device[1])
    return g


def add_episode_flags(p: argparse.ArgumentParser, *, episodes: Flag | None = None,
                      num_envs: Flag | None = None, eval_envs: Flag | None = None,
                      seed: Flag | None = None) -> Group:
    """How much is run: ``--episodes``, ``--num-envs`` (parallel envs), ``--eval-envs``
    (parallel evaluation envs) and ``--seed``, each given as ``(default, help)``; all ints
    (a ``None`` default: the verb decides)."""
    g = _group(p, "envs and episodes")
    for flag, spec in (("--episodes", episodes), ("--num-envs", num_envs),
                       ("--eval-envs", eval_envs), ("--seed", seed)):
        if spec is not None:
            g.add_argument(flag, type=int, default=spec[0], help=spec[1])
    return g


def add_output_flags(p: argparse.ArgumentParser, *, json: str = "JSON instead of a table",
                     png: str | None = None, save_json: str | None = None,
                     latency_model: str | None = None) -> Group:
    """What a verb writes: ``--json`` (print ``json`` instead of the table), and with their
    help ``--png FILE`` (a plot), ``--save-json FILE`` (the full result) and
    ``--write-latency-model FILE`` (a measured planner delay for ``edgerl train
    --latency-model``). Verbs add their own ``--out`` to the returned group."""
    g = _group(p, "output")
    g.add_argument("--json", action="store_true", help=f"print {json}")
    for flag, text in (("--png", png), ("--save-json", save_json),
                       ("--write-latency-model", latency_model)):
        if text is not None:
            g.add_argument(flag, type=Path, default=None, metavar="FILE", help=text)
    return g
