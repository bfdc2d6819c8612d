"""The operator console (``edgerl operator``): join a running graph and publish one
operator message, signed with the operator key (:mod:`edgerl_ros.operator`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from edgerl.contract.operator_auth import OperatorAuthError, OperatorKey
from edgerl_ros.operator import OperatorPublisher

__all__ = ["ACTIONS", "send_operator_message"]



#: Actions of :func:`send_operator_message` (``edgerl operator``).
ACTIONS = ("rearm", "override", "release", "estop")


def send_operator_message(action: str, key: OperatorKey | None, command: Sequence[float] = (),
                          domain_id: int | None = None, wait_s: float = 10.0) -> dict[str, Any]:
    """Join the graph on ``domain_id`` as the operator console and publish one message:
    ``rearm`` (signed ``robot/estop_reset``), ``override`` (signed, ``command`` in action
    units), ``release`` (signed) or ``estop`` (unsigned: anyone may stop). Waits up to
    ``wait_s`` for a receiver (the edit node, or the serial bridge for a re-arm) to be
    discovered, then for the reliable message to be delivered.

    Returns ``{"action", "key_id", "domain_id", "receivers", "stamp_ns", "delivered"}``.

    Raises:
        OperatorAuthError: a signed action without a key, or an unknown action.
    """
    from edgerl_ros.graph_config import ros_env
    from edgerl_ros.graph_record import domain_from_env
    from edgerl_ros.session import MonitorSession

    if action not in ACTIONS:
        raise OperatorAuthError(f"operator action must be one of {ACTIONS}, got {action!r}")
    if action != "estop" and key is None:
        raise OperatorAuthError(f"'{action}' must be signed: give the operator key "
                                f"(--key or EDGERL_OPERATOR_KEY)")
    domain = domain_from_env(domain_id)
    with MonitorSession(ros_env(domain), "edgerl_operator") as ros:
        console = OperatorPublisher(ros.node, key if key is not None else OperatorKey.generate())
        pub = console.rearm_pub if action == "rearm" else console.intervention_pub
        ros.spin()
        t_end = time.monotonic() + wait_s
        while pub.get_subscription_count() == 0 and time.monotonic() < t_end:
            time.sleep(0.05)
        receivers = pub.get_subscription_count()
        now_ns = time.time_ns()
        if action == "rearm":
            console.rearm(now_ns)
        elif action == "estop":  # unsigned on purpose
            from edgerl_ros.messages import make_joint_state

            pub.publish(make_joint_state(["estop"], np.zeros(0), now_ns))
        else:
            console.intervene(action, command if action == "override" else (), now_ns)
        delivered = bool(receivers) and pub.wait_for_all_acked(
            _duration(max(0.5, t_end - time.monotonic())))
    return {"action": action, "key_id": key.key_id if key is not None else "",
            "domain_id": domain, "receivers": receivers, "stamp_ns": now_ns,
            "delivered": delivered}


def _duration(seconds: float) -> Any:
    from rclpy.duration import Duration

    return Duration(nanoseconds=int(seconds * 1e9))
