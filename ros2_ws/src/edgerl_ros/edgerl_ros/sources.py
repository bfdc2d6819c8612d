"""Which publisher sent a message: publisher GIDs from rclpy's ``MessageInfo`` matched against
the graph's endpoint info, so a monitor counts only one node's messages on a shared topic
(anyone may publish on ``robot/command``)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable
from typing import Any

__all__ = ["PublisherFilter", "gid_key"]

#: Bytes of a GID that identify an endpoint (rmw pads the 16-byte DDS GUID to 16 or 24).
GID_BYTES = 16


def gid_key(gid: Any) -> bytes | None:
    """A comparable key for a GID: ``MessageInfo['publisher_gid']`` (a dict with ``data``),
    ``TopicEndpointInfo.endpoint_gid`` (a list of ints) or bytes. None when unknown."""
    if gid is None:
        return None
    if isinstance(gid, dict):
        gid = gid.get("data")
        if gid is None:
            return None
    try:
        raw = bytes(int(b) & 0xFF for b in gid)
    except (TypeError, ValueError):
        return None
    return raw[:GID_BYTES] if any(raw) else None


class PublisherFilter:
    """Accepts messages whose publisher is ``node_name``'s publisher on ``topic``.

    The publisher's GID is looked up in the ROS graph (``get_publishers_info_by_topic``) when
    a message from an unknown GID arrives, so the node may start after the filter; a GID found
    foreign is looked up again after ``recheck_s`` (data can arrive before the graph knows
    the endpoint: the graph learns node names from ``ros_discovery_info``, which may lag the
    DDS match; a long recheck counted a new edit node's first second of commands as foreign).
    Counts what it accepted; what it refused is attributed when read, against the graph
    then: ``foreign`` (another node's) and ``early`` (``node_name``'s, sent before the graph
    knew its endpoint; a monitor once counted a new edit node's first commands as foreign).

    Args:
        node: The rclpy node that subscribes (used for graph queries).
        topic: Topic name as subscribed (relative names resolve in ``node``'s namespace).
        node_name: Name of the node whose messages count (e.g. ``edit_policy_node``).
    """

    def __init__(self, node: Any, topic: str, node_name: str, recheck_s: float = 0.02) -> None:
        self.node, self.topic, self.node_name = node, topic, node_name
        self.recheck_s = recheck_s
        self._own: set[bytes] = set()
        self._foreign: dict[bytes, float] = {}  # GID -> when it was last looked up
        #: messages refused, by publisher GID (None: no GID): attributed at report time
        self._refused: dict[bytes | None, int] = {}
        self._lock = threading.Lock()
        self.accepted = 0

    def _refresh(self) -> None:
        topic = self.node.resolve_topic_name(self.topic)
        infos: Iterable[Any] = self.node.get_publishers_info_by_topic(topic)
        own = {gid_key(i.endpoint_gid) for i in infos if i.node_name == self.node_name}
        self._own |= {k for k in own if k is not None}  # a GID is never reused: kept

    def accept(self, message_info: Any) -> bool:
        """Whether the message with this ``MessageInfo`` came from ``node_name`` (a GID the
        graph does not know yet is refused: the safe answer for a robot)."""
        key = gid_key(message_info.get("publisher_gid") if isinstance(message_info, dict)
                      else None)
        with self._lock:
            now = time.monotonic()
            if key is not None and key not in self._own \
                    and now - self._foreign.get(key, -1e9) > self.recheck_s:
                self._refresh()
                if key not in self._own:
                    self._foreign[key] = now
            ok = key is not None and key in self._own
            if ok:
                self.accepted += 1
            else:
                self._refused[key] = self._refused.get(key, 0) + 1
            return ok

    def refused_by_origin(self) -> tuple[int, int]:
        """(foreign, early): refused messages whose publisher is, by the graph now, another
        node's / ``node_name``'s own (sent before the graph knew the endpoint)."""
        with self._lock:
            with contextlib.suppress(Exception):  # node or context gone: the known set
                self._refresh()
            early = sum(n for k, n in self._refused.items() if k is not None and k in self._own)
            return sum(self._refused.values()) - early, early

    @property
    def foreign(self) -> int:
        """Messages refused whose publisher is not ``node_name`` (looked up now)."""
        return self.refused_by_origin()[0]

    @property
    def early(self) -> int:
        """Messages of ``node_name`` refused before the graph knew its endpoint."""
        return self.refused_by_origin()[1]
