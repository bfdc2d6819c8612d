"""``ServerConfig``: the planner server's settings and their validation (see :mod:`.server`)."""

from __future__ import annotations

from dataclasses import dataclass

from edgerl.runtime.planners.wire import (
    DEFAULT_MAX_FRAME,
)
from edgerl.runtime.planners.wire_auth import is_loopback

__all__ = ["ServerConfig"]


@dataclass
class ServerConfig:
    """Serving settings.

    Attributes:
        host: Interface to bind (``127.0.0.1``: this machine only; anything else needs
            ``secret``).
        port: TCP port; ``0`` picks a free one (see :attr:`PlannerServer.address`).
        max_frame: Largest accepted request payload (bytes).
        max_clients: Connections beyond this are refused with ``overloaded``.
        obs_dim: Expected observation size (``None``: not checked here).
        secret: Shared secret (>= 16 bytes) for HMAC-SHA256 frame tags; ``None`` = no
            authentication (allowed on loopback only).
        idle_timeout_s: A connection sending no frame for this long is closed
            (``idle_timeout``).
        read_timeout_s: A frame must be complete this long after its first byte
            (``read_timeout``).
        write_timeout_s: A reply that cannot be handed to the kernel within this long closes
            the connection.
        max_outbuf: Reply bytes queued for one client before it counts as not reading.
        max_bad_frames: Refused messages per connection before it is closed.
        max_batch_rows: Largest batch the planner is given (rows), and the largest
            ``plan_batch`` accepted.
        batch_window_s: How long the batcher waits after the oldest queued request for
            others to join its batch.
        rows_per_s: Work quota per client: observation rows per second (token bucket with a
            burst of ``4 * max_batch_rows``).
        max_pending_batches: ``plan_batch`` requests one client may have queued.
        max_queue_rows: Rows queued across all clients before new work is ``overloaded``.
        admission: Refuse work that cannot meet its deadline (``deadline_unmeetable``) and
            skip queued work already past it. ``False``: serve everything in arrival order.
        inline: Run the planner on the event loop thread instead of the worker thread: two
            thread hand-offs fewer per batch (they dominate the round trip of a
            sub-millisecond planner on a busy machine), but no I/O while it computes. Only
            for planners that answer in well under a millisecond (a small MLP).
    """

    host: str = "127.0.0.1"
    port: int = 0
    max_frame: int = DEFAULT_MAX_FRAME
    max_clients: int = 128
    obs_dim: int | None = None
    secret: bytes | None = None
    idle_timeout_s: float = 60.0
    read_timeout_s: float = 2.0
    write_timeout_s: float = 2.0
    max_outbuf: int = 4 << 20
    max_bad_frames: int = 16
    max_batch_rows: int = 256
    batch_window_s: float = 0.002
    rows_per_s: float = 100000.0
    max_pending_batches: int = 2
    max_queue_rows: int = 8192
    admission: bool = True
    inline: bool = False

    def validate(self) -> None:
        """Raise ``ValueError`` naming a bad setting (before anything is bound)."""
        if self.secret is None and not is_loopback(self.host):
            raise ValueError(f"binding {self.host} (beyond loopback) requires a shared secret: "
                             "pass --secret-file or set EDGERL_PLANNER_SECRET")
        if self.secret is not None and len(self.secret) < 16:
            raise ValueError(f"secret must have at least 16 bytes, got {len(self.secret)}")
        for name in ("idle_timeout_s", "read_timeout_s", "write_timeout_s", "rows_per_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("max_frame", "max_clients", "max_bad_frames", "max_batch_rows",
                     "max_pending_batches", "max_queue_rows", "max_outbuf"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.batch_window_s < 0:
            raise ValueError(f"batch_window_s must be >= 0, got {self.batch_window_s}")
