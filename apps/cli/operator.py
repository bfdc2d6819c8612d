"""``edgerl operator ACTION``: the operator console of a running graph, and its key.

* ``keygen --key FILE [--key-id ID]``: write an operator key (mode 600). Give the same file
  to the robot (``EDGERL_OPERATOR_KEY``, or the nodes' ``operator_key_file`` parameter) and
  keep it on the operator's console only.
* ``rearm``: release the e-stop latch (edit node) and the firmware e-stop (serial bridge).
* ``override --command V [V ...]``: take over with a command in action units; ``release``
  hands back to the policy.
* ``estop``: stop (unsigned: any node may stop the robot).

``rearm``, ``override`` and ``release`` are signed with the key (``--key`` or
``EDGERL_OPERATOR_KEY``); the nodes refuse them otherwise (``docs/reliability.md``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

HELP = ("operator console: make the operator key, re-arm the e-stop, override / release, "
        "stop (signed messages)")

ACTIONS = ("keygen", "rearm", "override", "release", "estop")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=ACTIONS, help="what to do (see the description)")
    p.add_argument("--key", type=Path, default=None, metavar="FILE",
                   help="operator key file (default: EDGERL_OPERATOR_KEY); keygen writes it")
    p.add_argument("--key-id", default="operator",
                   help="keygen: the key's name, sent in clear with each message")
    p.add_argument("--command", type=float, nargs="+", default=None, metavar="V",
                   help="override: the command, one value per action (action units)")
    p.add_argument("--domain-id", type=int, default=None,
                   help="ROS_DOMAIN_ID of the graph (default: the environment's, else 0)")
    p.add_argument("--wait", type=float, default=10.0, metavar="S",
                   help="longest wait for the robot's nodes to be discovered (s)")
    out = flags.add_output_flags(p, json="the result as JSON")
    out.add_argument("--force", action="store_true", help="keygen: overwrite the key file")


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_json
    from edgerl.contract.operator_auth import OperatorAuthError, OperatorKey, load_operator_key

    try:
        if args.action == "keygen":
            if args.key is None:
                raise CliError("keygen needs --key FILE (where to write the key)")
            path = OperatorKey.generate(args.key_id).save(args.key, force=args.force)
            result = {"action": "keygen", "key_file": str(path), "key_id": args.key_id}
            if args.json:
                print_json(result)
            else:
                print(f"operator key '{args.key_id}': {path} (mode 600; give it to the robot "
                      "as EDGERL_OPERATOR_KEY and keep it on the operator's console)")
            return 0
        if args.action == "override" and not args.command:
            raise CliError("override needs --command V [V ...] (one value per action)")
        key = load_operator_key(args.key) if args.action != "estop" else None
        try:
            from edgerl_ros.operator_console import send_operator_message
        except ImportError as exc:
            raise CliError(f"ROS 2 support is not installed ({exc}); install edgerl[ros] and "
                           "ros2_ws/src/edgerl_ros (make venv)") from exc
        result = send_operator_message(args.action, key, args.command or (), args.domain_id,
                                       args.wait)
    except OperatorAuthError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json(result)
    else:
        print(f"{result['action']}: {result['receivers']} receiver(s) on ROS domain "
              f"{result['domain_id']}, delivered: {result['delivered']}")
    if not result["receivers"]:
        print(f"edgerl operator: error: no receiver on ROS domain {result['domain_id']} "
              f"within {args.wait:g} s: is a graph running there?", file=sys.stderr)
        return 1
    return 0
