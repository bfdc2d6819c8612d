"""``edgerl hil``: the firmware (host build on a pty, or the Cortex-M4 build in QEMU) against a
simulated plant, with faults."""

from __future__ import annotations

import argparse
from pathlib import Path

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

HELP = ("hardware-in-the-loop: real firmware (host build or Cortex-M4 in QEMU) <-> simulated "
        "plant, with fault injection")


def add_arguments(p: argparse.ArgumentParser) -> None:
    flags.add_bundle_flags(p, help="exported bundle for the host side (default: the task's LQR "
                                   "expert)")
    plant = flags.add_episode_flags(p, episodes=(1, "episodes (default 1)"),
                                    seed=(0, "seed (default 0)"))
    plant.add_argument("--task", default=None, help="plant task (default: cartpole)")
    plant.add_argument("--max-steps", type=int, default=None,
                       help="cap control steps per episode")
    fw = flags.add_firmware_flags(p, watchdog_ms=100)
    fw.add_argument("--mode", choices=("host-loop", "fast-loop"), default="host-loop",
                    help="host-loop: the host runs the edit loop and sends setpoints (default); "
                         "fast-loop: the host streams chunks and the firmware runs the bundle's "
                         "edit policy at its own rate (needs an edit --bundle)")
    fw.add_argument("--safe", choices=("zero", "hold"), default="zero",
                    help="firmware safe action on watchdog")
    fw.add_argument("--no-estop-check", action="store_true", help="skip the e-stop self-test")
    fw.add_argument("--link-probe", type=int, default=300,
                    help="ping-pong round trips on the same link after the episodes, the floor "
                         "cmd_rtt_p99_us is compared with (rtt_p99_vs_link; 0: off)")
    fw.add_argument("--faults", default="", help="injected faults, e.g. 'corrupt=0.01,drop=0.001,"
                    "garbage=2,freeze=1.0:0.5,unplug=2.0:0.3,seed=0'")
    flags.add_rt_flags(p, "the harness and the firmware, with a frozen GC; where SCHED_FIFO is "
                          "refused (no root / CAP_SYS_NICE) the run goes on without it: "
                          "rt_granted false")
    _planner_flags(p)
    noise = p.add_argument_group("disturbances")
    noise.add_argument("--action-noise", type=float, default=0.0,
                       help="Gaussian noise std (action units) on the command the plant applies "
                            "(the gated scenario trains with 0.1)")
    noise.add_argument("--kicks", default=None, metavar="SPEC",
                       help="rare large kicks on the applied command, after --action-noise (the "
                            "calm_kicks gate trains with 'rate=0.004,size=0.8,steps=6,dims=1'); "
                            "keys rate, size, steps, dims (indices joined by +), seed (default: "
                            "--seed + 2)")
    noise.add_argument("--operator", default=None, metavar="SPEC",
                       help="a scripted suboptimal operator overrides the host loop near failure, "
                            "e.g. 'theta=0.2,x=1.5,hold=15,gain=0.6,noise=0.2,seed=0' ('' = "
                            "defaults; also damping=, bias= (added to its command), bangbang=1 "
                            "(full-scale sign of it); edgerl.hil.operator; host-loop with a "
                            "--bundle)")
    noise.add_argument("--explore-std", type=float, default=0.0, metavar="S",
                       help="Gaussian noise std on the edit policy's residual (policy units, "
                            "before its bound) while the policy, not the operator, is in control; "
                            "the recording keeps the noisy command executed (host-loop with an "
                            "edit --bundle; default 0 = off)")
    noise.add_argument("--explore-seed", type=int, default=None,
                       help="seed of the exploration noise (default: --seed)")
    out = flags.add_output_flags(p, json="one JSON object", latency_model=(
        "write the measured planner delay (observation -> chunk, host side) as a latency model "
        "for `edgerl train --latency-model` (bundle mode)"))
    out.add_argument("--record", type=Path, default=None, metavar="FILE",
                     help="record the loop's transitions and the operator's interventions to "
                          "this MCAP file (for `edgerl finetune --interventions`)")


def _planner_flags(p: argparse.ArgumentParser) -> None:
    """The host side's planner: its added latency and, with a gated bundle, the gate."""
    g = p.add_argument_group("planner")
    g.add_argument("--planner-latency-ms", type=float, default=0.0,
                   help="added to every planner call (emulate a slow foundation model; "
                        "bundle mode)")
    g.add_argument("--gate-policy", default="gate",
                   help="bundle with a gate: who picks the planning budget at each decision: "
                        "gate (the bundle's gate.onnx, its argmax; default), gate:sample (a "
                        "draw from a categorical gate's softmax, seeded by --seed: the policy "
                        "PPO trained), fixed:NAME or age:NAME:STEPS (baselines); the host plans "
                        "with the plant's expert per budget")
    g.add_argument("--budget-workers", choices=("per-budget", "shared"), default="per-budget",
                   help="bundle with a gate: one expert process per budget, the gate deciding "
                        "while plans compute (default), or one shared process whose every "
                        "plan the next decision waits for")


def run(args: argparse.Namespace) -> int:
    import math
    import sys

    from tqdm.auto import tqdm

    from edgerl.apps.cli.latency_model import write_latency_model
    from edgerl.apps.cli.output import print_json, print_table
    from edgerl.hil.faults import FaultSpec
    from edgerl.hil.firmware import FirmwareConfig, FirmwareError
    from edgerl.hil.harness import HilConfig, run_hil
    from edgerl.hil.kicks import KickConfig
    from edgerl.hil.operator import OperatorConfig
    from edgerl.runtime.inference import InferenceError

    if args.episodes < 1:
        raise CliError("--episodes must be >= 1")
    if args.max_steps is not None and args.max_steps < 1:
        raise CliError("--max-steps must be >= 1")
    if not 1 <= args.watchdog_ms <= 60000:
        raise CliError("--watchdog-ms must be in 1..60000")
    if not 0.0 <= args.planner_latency_ms <= 10_000.0:
        raise CliError("--planner-latency-ms must be in 0..10000")
    if args.link_probe < 0:
        raise CliError("--link-probe must be >= 0")
    if not 0.0 <= args.action_noise <= 10.0:
        raise CliError("--action-noise must be in 0..10")
    if not 0 <= args.rt_priority <= 99:
        raise CliError("--rt-priority must be in 0..99 (0: off)")
    try:
        faults = FaultSpec.parse(args.faults)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.bundle is not None and not (args.bundle / "manifest.json").exists():
        raise CliError(f"--bundle {args.bundle}: no manifest.json there")
    if args.mode == "fast-loop" and args.bundle is None:
        raise CliError("--mode fast-loop needs an edit --bundle (its edit policy is built "
                       "into the firmware)")
    if args.write_latency_model is not None and args.bundle is None:
        raise CliError("--write-latency-model needs --bundle (the LQR expert has no planner)")
    try:
        operator = None if args.operator is None else OperatorConfig.parse(args.operator)
    except ValueError as exc:
        raise CliError(f"--operator: {exc}") from None
    try:
        kicks = None if args.kicks is None else KickConfig.parse(args.kicks)
    except ValueError as exc:
        raise CliError(f"--kicks: {exc}") from None
    if (operator is not None or args.record is not None) and (args.bundle is None
                                                               or args.mode != "host-loop"):
        raise CliError("--operator/--record need host-loop mode with an edit --bundle")
    if not (math.isfinite(args.explore_std) and 0.0 <= args.explore_std <= 10.0):
        raise CliError(f"--explore-std must be a finite number in 0..10, got "
                       f"{args.explore_std}")
    if args.explore_std and (args.bundle is None or args.mode != "host-loop"):
        raise CliError("--explore-std needs host-loop mode with an edit --bundle")
    cfg = HilConfig(bundle=args.bundle, task=args.task, episodes=args.episodes,
                    max_steps=args.max_steps, faults=faults,
                    firmware=FirmwareConfig(watchdog_ms=args.watchdog_ms, safe=args.safe),
                    check_estop=not args.no_estop_check, seed=args.seed,
                    planner_latency_s=args.planner_latency_ms / 1e3, target=args.target,
                    rt_priority=args.rt_priority, link_probe=args.link_probe, mode=args.mode,
                    gate_policy=args.gate_policy, action_noise_std=args.action_noise,
                    budget_workers=args.budget_workers, kicks=kicks, operator=operator,
                    record=args.record, explore_std=args.explore_std,
                    explore_seed=args.seed if args.explore_seed is None else args.explore_seed)
    bar = tqdm(total=args.episodes, desc="hil episodes", unit="ep",
               disable=args.json or not sys.stderr.isatty())
    try:
        with bar:
            result = run_hil(cfg, progress=lambda done, total: bar.update(1))
    except (FirmwareError, InferenceError, ValueError, KeyError, OSError) as exc:
        raise CliError(str(exc)) from None
    out = result.as_dict()
    if args.write_latency_model is not None:
        out["latency_model"] = write_latency_model(args.bundle, result.planner_latencies_s,
                                                   "hil", args.write_latency_model)
    if args.json:
        print_json(out)
    else:
        keys = ("success", "episodes", "cmd_rtt_p50_us", "cmd_rtt_p99_us", "bad_frames",
                "lost_frames", "watchdog_trips", "estop_ok", "estop_skipped",
                "corrupted_executed", "safe_entry_ms", "fw_safe_entry_us",
                "fw_safe_entry_late_us", "link_rtt_p99_us", "rtt_p99_vs_link", "target", "mode",
                "rt_granted")
        if args.mode == "fast-loop":
            keys += ("edit_ticks", "edit_ticks_with_chunk", "edit_tick_gap_p50_us",
                     "edit_compute_p50_us", "chunks_sent", "fw_chunks_rx")
        if "gate_policy" in out:
            keys += ("return_mean", "return_minus_cost_mean", "gate_policy", "gate_decided",
                     "gate_requests", "kicks_started",
                     "chunks_delivered", "chunks_late")
        rows = [{"metric": k, "value": out.get(k)} for k in keys]
        for i, u in enumerate(out.get("unplugs") or []):  # one row per cable pull
            rows.append({"metric": f"unplug {i + 1}", "value":
                         f"safe entry {u['safe_entry_ms']} ms (firmware clock), "
                         f"{u['safe_entry_host_ms']} ms (host); link down "
                         f"{u['link_down_ms']} ms"})
        print_table(rows, title="edgerl hil")
    return 0 if out["estop_ok"] is not False and out["corrupted_executed"] == 0 else 1
