"""``RemotePlannerConfig`` (with its ``Reconnect`` and ``Health`` groups), ``RemotePlannerError``
and the request records of :class:`~.remote.RemotePlanner` (waiters, the outbox item, requests
sent and awaiting an answer)."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any

from edgerl.runtime.planners.protocol.auth import check_key_id
from edgerl.runtime.planners.protocol.framing import DEFAULT_MAX_FRAME, PRIORITIES

__all__ = ["Health", "Reconnect", "RemotePlannerConfig", "RemotePlannerError"]


class RemotePlannerError(RuntimeError):
    """The server answered with an error, or could not be reached; ``code`` names it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


@dataclass
class Reconnect:
    """How the client connects, and reconnects after a disconnect.

    Attributes:
        connect_timeout_s: How long :meth:`RemotePlanner.start` waits for the server.
        reconnect_s: Pause between reconnection attempts after a disconnect.
        reconnect_max_s: Longest pause between reconnection attempts (the pause doubles
            from ``reconnect_s`` after each failure).
    """

    connect_timeout_s: float = 5.0
    reconnect_s: float = 0.5
    reconnect_max_s: float = 5.0

    def __post_init__(self) -> None:
        _positive(self, ("connect_timeout_s", "reconnect_s", "reconnect_max_s"))


@dataclass
class Health:
    """When ``health()`` calls the server slow or dead.

    Attributes:
        slow_factor: ``SLOW`` when the round-trip p50 exceeds
            ``slow_factor * info.expected_latency_s`` (and some milliseconds).
        dead_after_s: ``DEAD`` when a sent request has had no answer for this long (the
            server is connected but not answering).
    """

    slow_factor: float = 2.0
    dead_after_s: float = 5.0

    def __post_init__(self) -> None:
        _positive(self, ("dead_after_s",))


@dataclass
class RemotePlannerConfig:
    """Client settings (:func:`edgerl.contract.config_groups.change` sets a group's field by
    its name, as ``RemotePlanner(**overrides)`` does).

    Attributes:
        host: Server address.
        port: Server TCP port.
        deadline_s: Budget per request (s) from the server's receipt; 0 = none. A chunk
            arriving later than ``deadline_s`` after ``request()`` is dropped too.
        reconnect: Connection wait and reconnection backoff.
        health: The ``SLOW`` and ``DEAD`` thresholds of ``health()``.
        max_frame: Largest accepted reply payload (bytes).
        max_future_s: A chunk whose ``t0`` is more than this after its ``obs_time`` is
            rejected.
        secret: Shared secret of an authenticated server (``--secret-file``), or the secret
            of this client's named key (with ``key_id``), or ``None``.
        key_id: The name of this client's key on a server with named keys
            (``--client-key``/``--client-keys``), sent in the clear in the client's hello;
            ``secret`` is then that key's secret. ``None`` (default): the shared secret.
        priority: ``robot`` (default) or ``training``: the server serves robots first. A
            server with named keys refuses a priority above the key's (``priority_denied``).
    """

    host: str = "127.0.0.1"
    port: int = 7700
    deadline_s: float = 0.0
    reconnect: Reconnect = field(default_factory=Reconnect)
    health: Health = field(default_factory=Health)
    max_frame: int = DEFAULT_MAX_FRAME
    max_future_s: float = 1.0
    secret: bytes | None = None
    key_id: str | None = None
    priority: str = "robot"

    def __post_init__(self) -> None:
        if self.key_id is not None:
            check_key_id(self.key_id)
            if self.secret is None:
                raise ValueError(f"key_id {self.key_id!r} needs that key's secret")
        if self.priority not in PRIORITIES:
            raise ValueError(f"priority must be one of {PRIORITIES}, got {self.priority!r}")
        _positive(self, ("max_future_s",))
        if self.deadline_s < 0:
            raise ValueError(f"deadline_s must be >= 0, got {self.deadline_s}")


def _positive(cfg: Any, names: tuple[str, ...]) -> None:
    """``ValueError`` naming the first of ``cfg``'s ``names`` that is not > 0."""
    for name in names:
        if not getattr(cfg, name) > 0:
            raise ValueError(f"{name} must be > 0, got {getattr(cfg, name)}")


@dataclass
class _Waiter:
    event: threading.Event
    reply: dict[str, Any] | None = None


@dataclass
class _Outgoing:
    req_id: int
    payload: dict[str, Any]
    created: float  # client monotonic seconds
    deadline_s: float
    obs_time: float = math.nan


@dataclass
class _Sent:
    """A request sent to the server, waiting for its answer."""

    created: float  # client monotonic seconds of request()
    deadline_s: float
    obs_time: float  # as sent (the reply must echo it)
    sent: float  # client monotonic seconds when it went out
