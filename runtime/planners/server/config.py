"""The planner server's settings (:class:`ServerConfig`), its limits in three groups: when a
connection is closed (:class:`ConnectionLimits`), how requests are batched
(:class:`Batching`) and how much work each client and the queue may hold
(:class:`WorkQuotas`). :func:`edgerl.contract.config_groups.build` sets any of them by its own
name (``build(ServerConfig, port=0, max_batch_rows=8)``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from edgerl.runtime.planners.protocol.auth import is_loopback
from edgerl.runtime.planners.protocol.framing import DEFAULT_MAX_FRAME

__all__ = ["Batching", "ConnectionLimits", "ServerConfig", "WorkQuotas"]


@dataclass
class ConnectionLimits:
    """When the server closes a connection.

    Attributes:
        idle_timeout_s: A connection sending no frame for this long is closed
            (``idle_timeout``).
        read_timeout_s: A frame must be complete this long after its first byte
            (``read_timeout``).
        write_timeout_s: A reply that cannot be handed to the kernel within this long closes
            the connection.
        max_outbuf: Reply bytes queued for one client before it counts as not reading.
        max_bad_frames: Refused messages per connection before it is closed.
        auth_timeout_s: With a secret, a connection must send its first authenticated frame
            within this long, or it is closed (``auth_timeout``): an idle unauthenticated
            connection holds no slot for ``idle_timeout_s``.
        max_unauthenticated: Connections not yet authenticated, in all; more are refused
            (``overloaded``). Only authenticated connections count against ``max_clients``.
        max_unauthenticated_per_peer: Connections not yet authenticated from one address.
    """

    idle_timeout_s: float = 60.0
    read_timeout_s: float = 2.0
    write_timeout_s: float = 2.0
    max_outbuf: int = 4 << 20
    max_bad_frames: int = 16
    auth_timeout_s: float = 2.0
    max_unauthenticated: int = 64
    max_unauthenticated_per_peer: int = 8


@dataclass
class Batching:
    """How queued requests become the planner's batches.

    Attributes:
        max_batch_rows: Largest batch the planner is given (rows), and the largest
            ``plan_batch`` accepted.
        batch_window_s: How long the batcher waits after the oldest queued request for
            others to join its batch.
        inline: Run the planner on the event loop thread instead of the worker thread: two
            thread hand-offs fewer per batch (they dominate the round trip of a
            sub-millisecond planner on a busy machine), but no I/O while it computes. Only
            for planners that answer in well under a millisecond (a small MLP).
    """

    max_batch_rows: int = 256
    batch_window_s: float = 0.002
    inline: bool = False


@dataclass
class WorkQuotas:
    """How much work one client, and all of them, may have the server hold.

    Attributes:
        rows_per_s: Work quota per client: observation rows per second (token bucket with a
            burst of ``4 * max_batch_rows``).
        max_pending_batches: ``plan_batch`` requests one client may have queued.
        max_queue_rows: Rows queued across all clients before new work is ``overloaded``.
        admission: Refuse work that cannot meet its deadline (``deadline_unmeetable``) and
            skip queued work already past it. ``False``: serve everything in arrival order.
    """

    rows_per_s: float = 100000.0
    max_pending_batches: int = 2
    max_queue_rows: int = 8192
    admission: bool = True


@dataclass
class ServerConfig:
    """Serving settings.

    Attributes:
        host: Interface to bind (``127.0.0.1``: this machine only; anything else needs
            ``secret``).
        port: TCP port; ``0`` picks a free one (see :attr:`PlannerServer.address`).
        max_frame: Largest accepted request payload (bytes).
        max_clients: Authenticated connections beyond this are refused with ``overloaded``
            (connections still authenticating have their own caps, :class:`ConnectionLimits`).
        obs_dim: Expected observation size (``None``: not checked here).
        secret: Shared secret (>= 16 bytes) for HMAC-SHA256 frame tags; ``None`` = no
            authentication (allowed on loopback only).
        connections: When a connection is closed.
        batching: How requests are batched.
        quotas: How much work a client and the queue may hold.
    """

    host: str = "127.0.0.1"
    port: int = 0
    max_frame: int = DEFAULT_MAX_FRAME
    max_clients: int = 128
    obs_dim: int | None = None
    secret: bytes | None = None
    connections: ConnectionLimits = field(default_factory=ConnectionLimits)
    batching: Batching = field(default_factory=Batching)
    quotas: WorkQuotas = field(default_factory=WorkQuotas)

    def validate(self) -> None:
        """Raise ``ValueError`` naming a bad setting (before anything is bound)."""
        if self.secret is None and not is_loopback(self.host):
            raise ValueError(f"binding {self.host} (beyond loopback) requires a shared secret: "
                             "pass --secret-file or set EDGERL_PLANNER_SECRET")
        if self.secret is not None and len(self.secret) < 16:
            raise ValueError(f"secret must have at least 16 bytes, got {len(self.secret)}")
        conn, batching, quotas = self.connections, self.batching, self.quotas
        positive = {"idle_timeout_s": conn.idle_timeout_s, "read_timeout_s": conn.read_timeout_s,
                    "write_timeout_s": conn.write_timeout_s, "rows_per_s": quotas.rows_per_s,
                    "auth_timeout_s": conn.auth_timeout_s}
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        counts = {"max_frame": self.max_frame, "max_clients": self.max_clients,
                  "max_bad_frames": conn.max_bad_frames,
                  "max_batch_rows": batching.max_batch_rows,
                  "max_pending_batches": quotas.max_pending_batches,
                  "max_queue_rows": quotas.max_queue_rows, "max_outbuf": conn.max_outbuf,
                  "max_unauthenticated": conn.max_unauthenticated,
                  "max_unauthenticated_per_peer": conn.max_unauthenticated_per_peer}
        for name, value in counts.items():
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if batching.batch_window_s < 0:
            raise ValueError(f"batch_window_s must be >= 0, got {batching.batch_window_s}")
