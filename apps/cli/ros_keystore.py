"""``edgerl ros-keystore DIR [--robot sim|serial|ros2_control]``: an SROS2 keystore for the
node graph (DDS Security), the input of ``edgerl deploy --keystore DIR``.

One CA (ECDSA P-256) signs an identity certificate per process and, per process, a
``permissions.xml`` granting exactly the topics that node publishes and reads (the table in
:mod:`edgerl_ros.security`): only the edit policy's enclave may publish ``robot/command``,
only the operator's the e-stop re-arm and interventions. The layout is the one
``ros2 security create_keystore`` / ``create_enclave`` write, so ROS 2's own tools (and
``ros2 launch`` with ``--enclave``) use it too. ``private/`` holds the CA key: keep it on
the machine that issues keystores, copy only ``public/`` and ``enclaves/`` to the robot.

An existing keystore is replaced only with ``--force`` (a new CA: enclaves copied elsewhere
stop working). Making a keystore works on any install; enforcing it needs a ROS 2 whose DDS
has the security plugins (``edgerl deploy --keystore`` checks and says so).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

HELP = ("write an SROS2 keystore (DDS security) whose enclaves let each node of the graph "
        "publish only its own topics (edgerl deploy --keystore)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, metavar="DIR",
                   help="keystore directory (absent or empty; an existing keystore needs "
                        "--force)")
    g = p.add_argument_group("graph")
    g.add_argument("--robot", default="sim", choices=("sim", "serial", "ros2_control"),
                   help="robot side the /edgerl/robot enclave is for, as in `edgerl deploy "
                        "--robot` (default sim; with `deploy --robot ros` the robot's own "
                        "driver needs an enclave of its own)")
    g.add_argument("--params", type=Path, default=None,
                   help="ROS 2 parameter YAML the graph runs with (default: "
                        "edgerl_ros/config/edgerl.yaml): --robot ros2_control takes its "
                        "controller topics from it")
    g.add_argument("--domain-id", type=int, default=None,
                   help="grant only this ROS_DOMAIN_ID (default: every domain, 0..232; "
                        "deploy then uses it)")
    g.add_argument("--force", action="store_true",
                   help="replace an existing keystore (new CA and keys)")
    flags.add_output_flags(p, json="the enclaves and their topics as JSON")


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_result

    try:
        from edgerl_ros.graph_config import DEFAULT_CONFIG, DeployError, load_params_yaml
        from edgerl_ros.security import KeystoreError, create_keystore
    except ImportError as exc:
        raise CliError(f"ROS 2 support is not installed ({exc}); install edgerl[ros] and "
                       "ros2_ws/src/edgerl_ros (make venv)") from exc
    try:
        params = load_params_yaml(args.params or DEFAULT_CONFIG)
        ks = create_keystore(args.dir, args.robot, params=params, domain_id=args.domain_id,
                             force=args.force)
    except (KeystoreError, DeployError, OSError) as exc:
        raise CliError(str(exc)) from None
    lo, hi = ks.domains
    result = {"keystore": str(ks.root), "robot": ks.robot,
              "domains": lo if lo == hi else f"{lo}..{hi}", "enclaves": ks.summary()}
    print_result(result, as_json=args.json, title=f"edgerl ros-keystore {ks.root}",
                 rows=ks.summary())
    if not args.json:
        print(f"keystore {ks.root} (robot {ks.robot}, ROS domains {result['domains']}); "
              f"keep {ks.root / 'private'} secret; run: edgerl deploy --keystore {ks.root}")
    return 0
