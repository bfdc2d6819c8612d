"""``edgerl soak --bundle B``: the deploy graph and the serial HIL path under faults for
``--minutes``; exit 1 if any unsafe command or crash was seen (docs/reliability.md, "Soak")."""

from __future__ import annotations

import argparse
import signal

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

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


#: SoakConfig fields exposed as flags (help, types and defaults come from the config), and
#: the flag names that differ from the field names.
FLAG_FIELDS = ("minutes", "rate_hz", "rt_priority", "kill_every_s", "bad_hz", "rearm_after_s",
               "serial", "serial_faults", "serial_steps", "domain_id", "log_dir")
FLAG_NAMES = {"kill_every_s": "kill-every", "rearm_after_s": "rearm-after"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    from edgerl.apps.cli.config_flags import add_dataclass_flags
    from edgerl.apps.soak.config import SoakConfig

    flags.add_bundle_flags(p, required=True, help="bundle directory to deploy")
    add_dataclass_flags(p, SoakConfig, FLAG_FIELDS, names=FLAG_NAMES)
    flags.add_output_flags(p, json="the report as JSON")


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.config_flags import dataclass_flags, flag_values
    from edgerl.apps.cli.output import print_json, print_table
    from edgerl.apps.soak import SoakConfig, SoakError
    from edgerl.apps.soak.run import run_soak

    values = flag_values(args, dataclass_flags(SoakConfig, FLAG_FIELDS, names=FLAG_NAMES))
    cfg = SoakConfig(bundle=args.bundle, **values)
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
