"""``edgerl soak --bundle B``: the deploy graph and the serial HIL path under faults for
``--minutes``; exit 1 if any unsafe command or crash was seen (docs/reliability.md, "Soak")."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

from edgerl.cli import CliError

HELP = ("soak test: deploy graph at 500 Hz + serial HIL under planner kills, bad messages, "
        "corruption and unplugs; counts unsafe commands and crashes")

#: (metric, verdict rule) rows of the summary table.
ROWS = (
    ("unsafe_commands", "must be 0"), ("crashes", "must be 0"), ("minutes", ""),
    ("cmd_rate_hz", "vs rate_hz"), ("rt_permitted", ""), ("rt_applied_edit_node", ""),
    ("commands_checked", ""), ("commands_foreign", "not ours: robot must refuse"),
    ("commands_while_estopped", "must be the safe action"), ("planner_kills", ""),
    ("planner_restarts", ""), ("deadline_misses", "report"), ("estop_ticks", "report"),
    ("bad_sent", ""), ("bad_refused", "refusals counted by the nodes"),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bundle", required=True, type=Path, help="bundle directory to deploy")
    p.add_argument("--minutes", type=float, default=30.0, help="run length (default 30)")
    p.add_argument("--rate-hz", type=float, default=500.0,
                   help="robot and edit-loop rate (default 500)")
    p.add_argument("--rt-priority", type=int, default=50,
                   help="SCHED_FIFO priority where permitted (0: off; default 50)")
    p.add_argument("--kill-every", type=float, default=60.0,
                   help="SIGKILL + restart the planner every this many seconds (0: never)")
    p.add_argument("--bad-hz", type=float, default=20.0,
                   help="bad messages per second, rotating over every topic (default 20)")
    p.add_argument("--rearm-after", type=float, default=5.0,
                   help="operator re-arm: publish robot/estop_reset once the loop has been "
                        "e-stopped this long (s; 0 = never)")
    p.add_argument("--no-serial", action="store_true", help="skip the serial HIL path")
    p.add_argument("--serial-faults", default="corrupt=0.005,corrupt_rx=0.001,garbage=2",
                   help="edgerl hil --faults for each serial run (an unplug is added)")
    p.add_argument("--serial-steps", type=int, default=300,
                   help="control steps per serial HIL run (default 300)")
    p.add_argument("--domain-id", type=int, default=None, help="ROS_DOMAIN_ID (default random)")
    p.add_argument("--log-dir", type=Path, default=None, help="keep node logs here")
    p.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace) -> int:
    from edgerl.cli.output import print_json, print_table
    from edgerl.soak import SoakConfig, SoakError
    from edgerl.soak.run import run_soak

    cfg = SoakConfig(bundle=args.bundle, minutes=args.minutes, rate_hz=args.rate_hz,
                     rt_priority=args.rt_priority, kill_every_s=args.kill_every,
                     bad_hz=args.bad_hz, serial=not args.no_serial,
                     serial_faults=args.serial_faults, serial_steps=args.serial_steps,
                     domain_id=args.domain_id, log_dir=args.log_dir,
                     rearm_after_s=args.rearm_after)
    old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        result = run_soak(cfg)
    except SoakError as exc:
        raise CliError(str(exc)) from None
    finally:
        signal.signal(signal.SIGTERM, old_term)
    if args.json:
        print_json(result)
    else:
        rows = [{"metric": k, "value": result.get(k), "rule": rule} for k, rule in ROWS]
        for key, value in result["escalations"].items():
            rows.append({"metric": key, "value": value, "rule": "report"})
        for name, rss in result["rss"].items():
            rows.append({"metric": f"rss_growth_mb {name}", "value": rss.get("growth_mb"),
                         "rule": f"2nd half: {rss.get('growth_2nd_half_mb')}"})
        for key, value in result.get("serial", {}).items():
            rows.append({"metric": f"serial {key}", "value": value, "rule": ""})
        print_table(rows, title=f"edgerl soak: {result['verdict']}")
    return 0 if result["unsafe_commands"] == 0 and result["crashes"] == 0 else 1


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
