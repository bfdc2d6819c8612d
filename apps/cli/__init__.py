"""The ``edgerl`` command line: one entry point, one module per verb.

Each verb module (listed in :data:`VERBS`) defines ``HELP`` (one line), ``add_arguments(p)``
and ``run(args) -> int``, and imports its heavy dependencies (torch, MuJoCo, rclpy) inside
``run`` so ``edgerl --help`` stays fast and works on a ``[runtime]``-only install.

Exit status: 0 ok, 1 a user error (:class:`CliError`), 2 an unusable bundle (any
:class:`~edgerl.contract.bundle_errors.BundleError` subclass, printed with its class name; argparse
also uses 2 for bad arguments), 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from edgerl.apps.cli.errors import CliError
from edgerl.apps.cli.registry import add_module_parsers
from edgerl.contract._version import __version__
from edgerl.contract.logs import LEVELS, setup_logging

__all__ = ["VERBS", "CliError", "main"]

log = logging.getLogger(__name__)

#: verb -> module implementing it. Order is the order shown in ``--help``.
VERBS: dict[str, str] = {
    "tasks": "edgerl.apps.cli.tasks",
    "train": "edgerl.apps.cli.train",
    "eval": "edgerl.apps.cli.eval",
    "results": "edgerl.apps.cli.results",
    "experiment": "edgerl.apps.cli.experiment",
    "protocol": "edgerl.apps.cli.protocol",
    "export": "edgerl.apps.cli.export",
    "finetune": "edgerl.apps.cli.finetune",
    "inspect": "edgerl.apps.cli.inspect",
    "trt-engine": "edgerl.apps.cli.trt_engine",
    "keygen": "edgerl.apps.cli.keygen",
    "sign": "edgerl.apps.cli.sign",
    "ros-keystore": "edgerl.apps.cli.ros_keystore",
    "operator": "edgerl.apps.cli.operator",
    "bench": "edgerl.apps.cli.bench",
    "hil": "edgerl.apps.cli.hil",
    "deploy": "edgerl.apps.cli.deploy",
    "soak": "edgerl.apps.cli.soak",
    "record": "edgerl.apps.cli.record",
    "replay": "edgerl.apps.cli.replay",
    "serve-planner": "edgerl.apps.cli.serve_planner",
    "language-planner": "edgerl.apps.cli.language_planner",
    "demo": "edgerl.apps.cli.demo",
    "gate": "edgerl.apps.cli.gate",
}


def build_parser() -> argparse.ArgumentParser:
    """The full parser with every verb's sub-parser."""
    parser = argparse.ArgumentParser(
        prog="edgerl",
        description="Latency-aware asynchronous RL: train in simulation, export, deploy on "
                    "ROS 2 and firmware.",
    )
    parser.add_argument("--version", action="version", version=f"edgerl {__version__}")
    parser.add_argument("--log-level", default="INFO", choices=LEVELS, type=str.upper,
                        help="logging verbosity (default INFO)")
    add_module_parsers(parser, VERBS, dest="verb", metavar="VERB", run_attr="_run")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the verb; returns the process exit status."""
    from edgerl.contract.bundle_errors import BundleError

    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    try:
        return int(args._run(args) or 0)
    except CliError as exc:
        bundle_exc = exc.__cause__ if isinstance(exc.__cause__, BundleError) else None
        if bundle_exc is None:
            print(f"edgerl {args.verb}: error: {exc}", file=sys.stderr)
            return 1
        print(f"edgerl {args.verb}: bundle refused ({type(bundle_exc).__name__}): {exc}",
              file=sys.stderr)
        return 2
    except BundleError as exc:
        print(f"edgerl {args.verb}: bundle refused ({type(exc).__name__}): {exc}",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"edgerl {args.verb}: interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
