"""``edgerl record OUT.mcap [--duration S] [--domain-id N]``: join a running edgerl graph and
record its topics (state, command, chunk, instruction, episode, operator intervention,
diagnostics) to a ROS 2 MCAP until the duration ends or Ctrl-C; prints per-topic counts."""

from __future__ import annotations

import argparse
from pathlib import Path

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

HELP = ("record a running edgerl graph's topics (incl. operator interventions) to a ROS 2 "
        "MCAP, for a duration or until Ctrl-C")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", type=Path, help="the .mcap file to write")
    p.add_argument("--duration", type=float, default=None, metavar="S",
                   help="seconds to record (default: until Ctrl-C / SIGTERM)")
    p.add_argument("--domain-id", type=int, default=None,
                   help="ROS_DOMAIN_ID of the graph (default: the environment's, else 0; "
                        "`edgerl deploy` reports its ros_domain_id)")
    out = flags.add_output_flags(p, json="the counts as JSON")
    out.add_argument("--force", action="store_true", help="overwrite an existing file")


def run(args: argparse.Namespace) -> int:
    import sys

    from edgerl.apps.cli.output import print_json, print_table

    try:
        from edgerl_ros.graph_record import record_graph
    except ImportError as exc:
        raise CliError(f"ROS 2 support is not installed ({exc}); install edgerl[ros] and "
                       "ros2_ws/src/edgerl_ros (make venv)") from exc
    if sys.stderr.isatty():
        print(f"recording to {args.out}; Ctrl-C stops", file=sys.stderr)
    result = record_graph(args.out, args.duration, args.domain_id, force=args.force)
    if args.json:
        print_json(result)
    else:
        print_table(result["topics"], title=f"edgerl record {result['file']} "
                    f"({result['duration_s']:.1f} s, stopped by {result['stopped_by']})")
    if result["messages"] == 0:
        print(f"edgerl record: error: no messages in {result['duration_s']:.1f} s on ROS "
              f"domain {result['domain_id']}: is a graph running there (edgerl deploy "
              f"--domain-id {result['domain_id']})?", file=sys.stderr)
        return 1
    return 0
