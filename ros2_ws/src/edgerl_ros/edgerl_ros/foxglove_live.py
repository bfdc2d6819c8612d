"""``LiveView``: serve a running graph's topics to Foxglove over the Foxglove WebSocket
protocol, so a person watches state, chunks, commands and latency while the robot runs.

``edgerl deploy --foxglove PORT`` starts one beside the deploy process's monitor node. It owns
its own rclpy node in the monitor's context, spun by its own thread: a JSON conversion never
holds up the monitor's executor (whose command callback timestamps arrivals for the latency
figures) and never runs in a node process (the edit loop is elsewhere). A state, command or
chunk callback returns at once unless a Foxglove client subscribes to that channel, and a
channel publishes at most ``max_rate_hz`` messages per second, so an unwatched live view
costs one check per message (diagnostics, ~1 Hz per node, are always merged).

Channels (JSON encoding, a JSON schema each; log time = receive time, ns since the epoch):

* ``/edgerl/state``: ``{stamp_ns, names, values, field}`` from ``robot/joint_states``.
* ``/edgerl/command``: ``{stamp_ns, names, values, field, e2e_latency_ms}`` from
  ``robot/command``; ``e2e_latency_ms`` = receive time - the command's header stamp (the
  stamp of the state it was computed from), ms; ``null`` for an unstamped command.
* ``/edgerl/chunk``: ``{stamp_ns, names, rows, dt}`` from ``planner/chunk``: one row per
  trajectory point (action columns, then ``intent/k``), ``dt`` the point spacing in s.
* ``/edgerl/diagnostics``: ``{node: {key: value}}``, every node seen so far on
  ``/diagnostics`` (the newest values of each).

Non-finite numbers travel as ``null`` (JSON has no NaN; Foxglove's parser refuses it). The
server binds to loopback unless told otherwise: the protocol has no authentication.

``foxglove-sdk`` is optional (``pip install 'edgerl[live]'``); this module imports it only when
a :class:`LiveView` starts, so it loads without it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from edgerl_ros.graph_config import DeployError

__all__ = ["CHANNELS", "INSTALL_HINT", "LiveConfig", "LiveView", "LiveViewError",
           "chunk_payload", "diagnostics_payload", "joint_state_payload", "live_view",
           "require_foxglove"]

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'edgerl[live]'"

#: Foxglove topic -> (schema name, JSON schema of its messages).
CHANNELS: dict[str, tuple[str, dict[str, Any]]] = {
    "/edgerl/state": ("edgerl.State", {
        "type": "object",
        "properties": {
            "stamp_ns": {"type": "integer", "description": "header stamp, ns since the epoch"},
            "names": {"type": "array", "items": {"type": "string"}},
            "values": {"type": "array", "items": {"type": ["number", "null"]}},
            "field": {"type": "string", "description": "JointState field of the values"},
        },
    }),
    "/edgerl/command": ("edgerl.Command", {
        "type": "object",
        "properties": {
            "stamp_ns": {"type": "integer", "description": "stamp of the state it answers, ns"},
            "names": {"type": "array", "items": {"type": "string"}},
            "values": {"type": "array", "items": {"type": ["number", "null"]}},
            "field": {"type": "string", "description": "JointState field of the values"},
            "e2e_latency_ms": {"type": ["number", "null"],
                               "description": "receive time - stamp_ns, ms"},
        },
    }),
    "/edgerl/chunk": ("edgerl.Chunk", {
        "type": "object",
        "properties": {
            "stamp_ns": {"type": "integer", "description": "planner observation time, ns"},
            "names": {"type": "array", "items": {"type": "string"}},
            "rows": {"type": "array",
                     "items": {"type": "array", "items": {"type": ["number", "null"]}}},
            "dt": {"type": ["number", "null"], "description": "point spacing, s"},
        },
    }),
    "/edgerl/diagnostics": ("edgerl.Diagnostics", {
        "type": "object",
        "description": "node -> {key: value}",
        "additionalProperties": {"type": "object",
                                 "additionalProperties": {"type": "string"}},
    }),
}

#: ``edgerl_ros.common.TOPICS`` key -> the Foxglove topic it is served on.
_SOURCES = {"state": "/edgerl/state", "command": "/edgerl/command", "chunk": "/edgerl/chunk",
            "diagnostics": "/edgerl/diagnostics"}


class LiveViewError(DeployError):
    """The live view cannot start: ``foxglove-sdk`` missing, or the port/host unusable."""


@dataclass(frozen=True)
class LiveConfig:
    """Where and how fast the Foxglove WebSocket server serves the graph.

    Attributes:
        port: TCP port (0: any free one, see :attr:`LiveView.port`).
        host: Address to bind; loopback by default (the protocol has no authentication:
            reach it through an SSH tunnel, or bind ``0.0.0.0`` on a trusted network only).
        max_rate_hz: Most messages per second per channel (0 = every message); a dropped
            message costs one clock read. Plots need far less than a 500 Hz loop's rate.
        name: Server name shown in Foxglove.
    """

    port: int = 8765
    host: str = "127.0.0.1"
    max_rate_hz: float = 50.0
    name: str = "edgerl"

    def __post_init__(self) -> None:
        if not 0 <= int(self.port) <= 65535:
            raise LiveViewError(f"foxglove port must be in 0..65535, got {self.port}")
        if not (math.isfinite(self.max_rate_hz) and self.max_rate_hz >= 0):
            raise LiveViewError(f"foxglove max_rate_hz must be >= 0, got {self.max_rate_hz}")
        if not self.host:
            raise LiveViewError("foxglove host must not be empty")


def require_foxglove() -> Any:
    """The ``foxglove`` module; :class:`LiveViewError` naming the install command when the
    optional ``foxglove-sdk`` is missing."""
    try:
        import foxglove
    except ImportError as exc:
        raise LiveViewError(f"the Foxglove live view needs foxglove-sdk ({exc}); install it "
                            f"with: {INSTALL_HINT}") from exc
    return foxglove


# --- message -> JSON payload (pure functions) -----------------------------------------------
def _num(v: float) -> float | None:
    v = float(v)
    return v if math.isfinite(v) else None


def _nums(values: Sequence[float]) -> list[float | None]:
    return [_num(v) for v in values]


def _stamp_ns(header: Any) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def joint_state_payload(msg: Any, recv_ns: int | None = None) -> dict[str, Any]:
    """A ``sensor_msgs/JointState`` as ``{stamp_ns, names, values, field}``.

    ``values`` come from the first of ``position``, ``velocity``, ``effort`` that is not empty
    (edgerl's states use ``position``; commands the edit node's ``command_field``), named in
    ``field``. With ``recv_ns`` (receive time, ns since the epoch) ``e2e_latency_ms`` is
    added: ``recv_ns - stamp_ns`` in ms, ``None`` when the stamp is zero.
    """
    field = next((f for f in ("position", "velocity", "effort") if len(getattr(msg, f))),
                 "position")
    stamp = _stamp_ns(msg.header)
    out: dict[str, Any] = {"stamp_ns": stamp, "names": list(msg.name),
                           "values": _nums(getattr(msg, field)), "field": field}
    if recv_ns is not None:
        out["e2e_latency_ms"] = (recv_ns - stamp) * 1e-6 if stamp > 0 else None
    return out


def chunk_payload(msg: Any) -> dict[str, Any]:
    """A ``trajectory_msgs/JointTrajectory`` chunk as ``{stamp_ns, names, rows, dt}``:
    ``rows[i]`` = point i's positions; ``dt`` = the spacing of the first two points (s;
    ``None`` with fewer than two)."""
    points = list(msg.points)
    offsets = [float(p.time_from_start.sec) + float(p.time_from_start.nanosec) * 1e-9
               for p in points[:2]]
    return {"stamp_ns": _stamp_ns(msg.header), "names": list(msg.joint_names),
            "rows": [_nums(p.positions) for p in points],
            "dt": offsets[1] - offsets[0] if len(offsets) == 2 else None}


def diagnostics_payload(msg: Any, into: dict[str, dict[str, str]] | None = None
                        ) -> dict[str, dict[str, str]]:
    """A ``diagnostic_msgs/DiagnosticArray`` merged into ``into`` (or a new dict) as
    ``{status name: {key: value}}``; returns the merged dict."""
    out = {} if into is None else into
    for st in msg.status:
        out[st.name] = {kv.key: kv.value for kv in st.values}
    return out


# --- the live view --------------------------------------------------------------------------
class LiveView:
    """A Foxglove WebSocket server fed from the graph's topics by its own rclpy node.

    Args:
        context: An initialised rclpy context in the graph's domain (``MonitorSession``'s).
        cfg: Server address and rate cap.
        node_name: Name of this view's node.

    Raises:
        LiveViewError: ``foxglove-sdk`` is not installed, or the server cannot bind (port in
            use, bad host); nothing is left running then.

    Attributes:
        port: The TCP port it listens on (the one chosen when ``cfg.port`` is 0).
        published: Messages sent per Foxglove topic (after the subscriber and rate checks).

    :meth:`stop` (idempotent) ends the spin thread, the node, the channels and the server.
    """

    def __init__(self, context: Any, cfg: LiveConfig | None = None,
                 node_name: str = "edgerl_live_view") -> None:
        fg = require_foxglove()  # before anything starts
        self.cfg = cfg or LiveConfig()
        self._fg_context = fg.Context()  # private: no other code's channels reach our clients
        self._channels: dict[str, Any] = {}
        self._last: dict[str, float] = {}
        self._min_period_s = 1.0 / self.cfg.max_rate_hz if self.cfg.max_rate_hz > 0 else 0.0
        self._diag: dict[str, dict[str, str]] = {}
        self.node: Any = None
        self._spin: Any = None
        self._server: Any = None
        self.published: dict[str, int] = dict.fromkeys(CHANNELS, 0)
        self.port = 0
        try:
            self._server = fg.start_server(name=self.cfg.name, host=self.cfg.host,
                                           port=int(self.cfg.port), context=self._fg_context)
        except RuntimeError as exc:  # FoxgloveError: bind failed
            raise LiveViewError(f"foxglove server on {self.cfg.host}:{self.cfg.port}: "
                                f"{exc}") from exc
        try:
            self.port = int(self._server.port)
            for topic, (schema_name, schema) in CHANNELS.items():
                self._channels[topic] = fg.Channel(
                    topic, message_encoding="json", context=self._fg_context,
                    schema=fg.Schema(name=schema_name, encoding="jsonschema",
                                     data=json.dumps(schema).encode()))
            self._subscribe(context, node_name)
        except BaseException:
            self.stop()
            raise
        log.info("Foxglove live view on ws://%s:%d (open connection -> Foxglove WebSocket)",
                 self.cfg.host, self.port)

    @property
    def url(self) -> str:
        """``ws://host:port`` to open in Foxglove."""
        return f"ws://{self.cfg.host}:{self.port}"

    def _subscribe(self, context: Any, node_name: str) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import QoSProfile
        from sensor_msgs.msg import JointState
        from trajectory_msgs.msg import JointTrajectory

        from edgerl_ros.common import CHUNK_QOS, DIAG_QOS, STATE_QOS, TOPICS
        from edgerl_ros.session import SpinThread, qos_kwargs

        # no parameter services and no rosout: an SROS2 enclave grants this process's topics,
        # not services under another node's name
        self.node = rclpy.create_node(node_name, context=context,
                                      start_parameter_services=False, enable_rosout=False)
        types = {"state": (JointState, STATE_QOS), "command": (JointState, STATE_QOS),
                 "chunk": (JointTrajectory, CHUNK_QOS),
                 "diagnostics": (DiagnosticArray, DIAG_QOS)}
        for key, topic in _SOURCES.items():
            msg_type, qos = types[key]
            # depth 1 for the fast topics: a late frame is worth nothing to a live plot
            depth = qos.depth if key == "diagnostics" else 1
            self.node.create_subscription(msg_type, TOPICS[key],
                                          self._callback(key, topic, msg_type),
                                          QoSProfile(**{**qos_kwargs(qos), "depth": depth}),
                                          raw=True)
        self._spin = SpinThread(context, self.node, name=node_name)

    def _callback(self, key: str, topic: str, msg_type: Any) -> Callable[[bytes], None]:
        """The raw subscription callback of ``key``: runs on this view's spin thread only."""
        from rclpy.serialization import deserialize_message

        channel = self._channels[topic]

        def cb(data: bytes) -> None:
            recv_ns = time.time_ns()
            if key == "diagnostics":  # rare: always merged, so a new viewer sees every node
                diagnostics_payload(deserialize_message(data, msg_type), self._diag)
            if not channel.has_sinks() or not self._due(topic):
                return  # nobody watches this channel, or it published a moment ago
            if key == "diagnostics":
                payload: dict[str, Any] = self._diag
            elif key == "chunk":
                payload = chunk_payload(deserialize_message(data, msg_type))
            else:
                payload = joint_state_payload(deserialize_message(data, msg_type),
                                              recv_ns if key == "command" else None)
            channel.log(json.dumps(payload, allow_nan=False).encode(), log_time=recv_ns)
            self.published[topic] += 1
        return cb

    def _due(self, topic: str) -> bool:
        """Whether ``topic`` may publish now under ``max_rate_hz`` (and note it did)."""
        if self._min_period_s <= 0:
            return True
        now = time.monotonic()
        if now - self._last.get(topic, -math.inf) < self._min_period_s:
            return False
        self._last[topic] = now
        return True

    def stop(self) -> None:
        """Stop spinning (no callback runs after this), destroy the node, close the channels
        and stop the server (its port is free when this returns). Idempotent."""
        if self._spin is not None:
            self._spin.stop()
            self._spin = None
        if self.node is not None:
            self.node.destroy_node()
            self.node = None
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        if self._server is not None:
            self._server.stop()
            self._server = None
            log.info("Foxglove live view on port %d stopped", self.port)


@contextlib.contextmanager
def live_view(context: Any, cfg: LiveConfig | None) -> Iterator[LiveView | None]:
    """``with live_view(ros.context, cfg) as view:`` a running :class:`LiveView` (``None``
    when ``cfg`` is ``None``), stopped on exit whatever happens."""
    if cfg is None:
        yield None
        return
    view = LiveView(context, cfg)
    try:
        yield view
    finally:
        view.stop()
