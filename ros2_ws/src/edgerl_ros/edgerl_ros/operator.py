"""The operator channel on ROS 2: signed e-stop re-arms and interventions
(:mod:`edgerl.contract.operator_auth`), and who may command the robot.

* :class:`OperatorGate`: a node's check of operator messages from its parameters
  ``operator_key_file`` (the operator key; default: the file named by ``EDGERL_OPERATOR_KEY``)
  and ``operator_auth`` (``required``, the default: unsigned or wrongly signed messages are
  refused and counted by reason; ``off``: any publisher is the operator, with a warning at
  start, for a closed bench only). Required with no key: every operator message is refused
  (``no_operator_key``), so an e-stop stays latched until a keyed operator re-arms it.
* :class:`OperatorPublisher`: an operator console's side (``edgerl operator``:
  :mod:`edgerl_ros.operator_console`, the soak's operator, tests): publishes signed re-arms
  and interventions.
* :data:`COMMAND_SOURCE_PARAM`: the robot nodes execute ``robot/command`` only from the edit
  node's publishers (by publisher GID, :class:`~edgerl_ros.sources.PublisherFilter`); others are
  refused as ``foreign``. Node names can be spoofed by anyone on the domain: SROS2 permissions
  (``edgerl ros-keystore``) are what stop a deliberate attacker (``docs/reliability.md``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from edgerl.contract.operator_auth import (
    OperatorAuthError,
    OperatorKey,
    OperatorSigner,
    OperatorVerifier,
    intervention_payload,
    load_operator_key,
)
from edgerl_ros.common import ParamSpec

__all__ = ["AUTH_MODES", "COMMAND_SOURCE_PARAM", "OPERATOR_PARAMS", "OperatorGate",
           "OperatorPublisher"]

log = logging.getLogger(__name__)

AUTH_MODES = ("required", "off")
OPERATOR_PARAMS = [
    ParamSpec("operator_key_file", "", "operator key (JSON, mode 600) that signs e-stop "
              "re-arms and interventions; empty: the file named by EDGERL_OPERATOR_KEY",
              read_only=True),
    ParamSpec("operator_auth", "required", "required: only messages signed with the "
              "operator key re-arm the e-stop or intervene; off: anyone on the domain may "
              "(closed bench only)", choices=AUTH_MODES, read_only=True),
]
COMMAND_SOURCE_PARAM = ParamSpec(
    "command_source", "edit_policy_node", "execute robot/command only from this node's "
    "publishers (others are refused as 'foreign'); empty: from any publisher",
    read_only=True)


class OperatorGate:
    """Checks operator messages for one node (see the module doc).

    Args:
        key_file: Operator key file ("" = ``EDGERL_OPERATOR_KEY``'s, or none).
        mode: ``required`` or ``off``.
        max_age_s: Oldest stamp accepted (s); 0 leaves freshness to the node's guard.

    Raises:
        OperatorAuthError: ``mode`` unknown or the key file unusable (named problem).
    """

    def __init__(self, key_file: str = "", mode: str = "required",
                 max_age_s: float = 1.0) -> None:
        if mode not in AUTH_MODES:
            raise OperatorAuthError(f"operator_auth must be one of {AUTH_MODES}, got {mode!r}")
        self.mode = mode
        self.key = load_operator_key(key_file or None) if mode == "required" else None
        self.verifier = (OperatorVerifier([self.key], max_age_s=max_age_s)
                         if self.key is not None else None)
        self.unauthenticated_accepted = 0  # mode off
        self.no_key_refused = 0
        if mode == "off":
            log.warning("operator_auth is off: any node on the ROS domain may re-arm the "
                        "e-stop and intervene")
        elif self.key is None:
            log.warning("no operator key (operator_key_file / EDGERL_OPERATOR_KEY): e-stop "
                        "re-arms and interventions are refused")

    def check(self, topic: str, header: Any, payload: bytes = b"",
              now_ns: int | None = None) -> str | None:
        """None when the message (``header``: its ``std_msgs/Header``) is the operator's,
        else the reason it is refused."""
        if self.mode == "off":
            self.unauthenticated_accepted += 1
            return None
        if self.verifier is None:
            self.no_key_refused += 1
            return "no_operator_key"
        from edgerl_ros.messages import stamp_to_ns

        return self.verifier.check(topic, header.frame_id, stamp_to_ns(header.stamp), payload,
                                   now_ns)

    def values(self) -> dict[str, Any]:
        """Diagnostics: mode, key id, accepted and refused by reason."""
        out: dict[str, Any] = {"operator_auth": self.mode,
                               "operator_key": self.key.key_id if self.key else ""}
        if self.verifier is not None:
            out["operator_accepted"] = self.verifier.accepted
            for reason, n in sorted(self.verifier.refused.items()):
                out[f"operator_refused {reason}"] = n
        if self.no_key_refused:
            out["operator_refused no_operator_key"] = self.no_key_refused
        if self.mode == "off":
            out["operator_accepted_unauthenticated"] = self.unauthenticated_accepted
        return out


class OperatorPublisher:
    """Publishes signed operator messages from ``node`` with ``key``."""

    def __init__(self, node: Any, key: OperatorKey) -> None:
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Header

        from edgerl_ros.common import INTERVENTION_QOS, TOPICS

        self.signer = OperatorSigner(key)
        self._topics = TOPICS
        self._header, self._joint_state = Header, JointState
        self.rearm_pub = node.create_publisher(Header, TOPICS["estop_reset"], INTERVENTION_QOS)
        self.intervention_pub = node.create_publisher(JointState, TOPICS["intervention"],
                                                      INTERVENTION_QOS)

    def rearm(self, now_ns: int | None = None) -> Any:
        """Publish a signed ``robot/estop_reset`` stamped ``now_ns`` (default now)."""
        from edgerl_ros.messages import ns_to_stamp

        now_ns = time.time_ns() if now_ns is None else now_ns
        msg = self._header(frame_id=self.signer.tag(self._topics["estop_reset"], now_ns))
        msg.stamp = ns_to_stamp(now_ns)
        self.rearm_pub.publish(msg)
        return msg

    def intervene(self, kind: str, command: Sequence[float] | np.ndarray = (),
                  now_ns: int | None = None) -> Any:
        """Publish a signed ``operator/intervention`` (``kind``, the override ``command``)."""
        from edgerl_ros.messages import ns_to_stamp

        now_ns = time.time_ns() if now_ns is None else now_ns
        values = np.asarray(command, dtype=np.float32)
        msg = self._joint_state(name=[kind], position=[float(v) for v in values])
        msg.header.stamp = ns_to_stamp(now_ns)
        msg.header.frame_id = self.signer.tag(self._topics["intervention"], now_ns,
                                              intervention_payload(kind, values))
        self.intervention_pub.publish(msg)
        return msg

