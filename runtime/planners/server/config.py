"""The planner server's settings (:class:`ServerConfig`), its limits in three groups: when a
connection is closed (:class:`ConnectionLimits`), how requests are batched
(:class:`Batching`) and how much work each client and the queue may hold
(:class:`WorkQuotas`). :func:`edgerl.contract.config_groups.build` sets any of them by its own
name (``build(ServerConfig, port=0, max_batch_rows=8)``).

Client identities (:class:`ClientKey`, ``ServerConfig.client_keys``): named secrets, each
with the most urgent priority its requests may claim; :func:`load_client_keys` reads them from
a JSON key file, :func:`parse_client_key` from a ``NAME:PRIORITY:SECRET_FILE`` flag."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from edgerl.runtime.planners.protocol.auth import check_key_id, is_loopback, load_secret
from edgerl.runtime.planners.protocol.framing import DEFAULT_MAX_FRAME, PRIORITIES

__all__ = ["Batching", "ClientKey", "ConnectionLimits", "ServerConfig", "WorkQuotas",
           "load_client_keys", "parse_client_key"]


@dataclass(frozen=True)
class ClientKey:
    """One named client identity of an authenticated server.

    Attributes:
        secret: The identity's secret for the HMAC-SHA256 frame tags (>= 16 bytes; never
            shown in ``repr``).
        max_priority: The most urgent of :data:`PRIORITIES` its requests may claim
            (``robot``: any; ``training``: ``training`` only). A request claiming more is
            refused with ``priority_denied``; one that names no priority gets the protocol
            default lowered to this.
    """

    secret: bytes = field(repr=False)
    max_priority: str

    def __post_init__(self) -> None:
        if self.max_priority not in PRIORITIES:
            raise ValueError(f"max_priority must be one of {PRIORITIES}, got "
                             f"{self.max_priority!r}")
        if len(self.secret) < 16:
            raise ValueError(f"a key's secret must have at least 16 bytes, got "
                             f"{len(self.secret)}")


def _read_key(key_id: str, max_priority: str, secret_file: str) -> ClientKey:
    if not secret_file:
        raise ValueError(f"client key {key_id!r}: no secret_file given")
    secret = load_secret(secret_file)
    assert secret is not None  # a path is given
    try:
        return ClientKey(secret, max_priority)
    except ValueError as exc:
        raise ValueError(f"client key {key_id!r}: {exc}") from exc


def parse_client_key(spec: str) -> tuple[str, ClientKey]:
    """``NAME:PRIORITY:SECRET_FILE`` (the ``--client-key`` flag) -> ``(key id, key)``; the
    secret is read from the file (surrounding whitespace stripped). ``ValueError`` naming
    what is wrong; ``OSError`` when the file cannot be read."""
    name, sep, rest = spec.partition(":")
    priority, sep2, path = rest.partition(":")
    if not sep or not sep2:
        raise ValueError(f"a client key looks like NAME:PRIORITY:SECRET_FILE, got {spec!r}")
    return check_key_id(name), _read_key(name, priority, path)


def load_client_keys(path: str) -> dict[str, ClientKey]:
    """Read a JSON key file: an object mapping each key id to ``{"secret_file": PATH,
    "max_priority": PRIORITY}`` (a relative ``PATH`` is relative to the key file's folder).
    ``ValueError`` naming the first bad entry; ``OSError`` when a file cannot be read."""
    with open(path, encoding="utf-8") as f:
        try:
            table = json.load(f)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not a JSON document ({exc})") from exc
    if not isinstance(table, dict) or not table:
        raise ValueError(f"{path}: expected an object of key id -> {{secret_file, "
                         "max_priority}}")
    folder = os.path.dirname(os.path.abspath(path))
    keys: dict[str, ClientKey] = {}
    for key_id, entry in table.items():
        check_key_id(key_id)
        if not isinstance(entry, dict) or set(entry) != {"secret_file", "max_priority"}:
            raise ValueError(f"{path}: key {key_id!r} must have exactly secret_file and "
                             "max_priority")
        secret_file = entry["secret_file"]
        if not isinstance(secret_file, str):
            raise ValueError(f"{path}: key {key_id!r}: secret_file must be a path")
        if secret_file and not os.path.isabs(secret_file):
            secret_file = os.path.join(folder, secret_file)
        keys[key_id] = _read_key(key_id, entry["max_priority"], secret_file)
    return keys


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
            ``secret`` or ``client_keys``).
        port: TCP port; ``0`` picks a free one (see :attr:`PlannerServer.address`).
        max_frame: Largest accepted request payload (bytes).
        max_clients: Authenticated connections beyond this are refused with ``overloaded``
            (connections still authenticating have their own caps, :class:`ConnectionLimits`).
        obs_dim: Expected observation size (``None``: not checked here).
        secret: Shared secret (>= 16 bytes) for HMAC-SHA256 frame tags: the identity of
            clients that name no key, allowed every priority. ``None`` with no
            ``client_keys`` = no authentication (allowed on loopback only); ``None`` with
            ``client_keys`` = every client must name its key.
        client_keys: Named client identities, key id -> :class:`ClientKey` (its secret and
            the most urgent priority it may claim); empty (default) = none. No two
            identities, the shared secret included, may share a secret.
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
    client_keys: dict[str, ClientKey] = field(default_factory=dict)
    connections: ConnectionLimits = field(default_factory=ConnectionLimits)
    batching: Batching = field(default_factory=Batching)
    quotas: WorkQuotas = field(default_factory=WorkQuotas)

    def validate(self) -> None:
        """Raise ``ValueError`` naming a bad setting (before anything is bound)."""
        if self.secret is None and not self.client_keys and not is_loopback(self.host):
            raise ValueError(f"binding {self.host} (beyond loopback) requires a shared secret: "
                             "pass --secret-file or set EDGERL_PLANNER_SECRET (or name "
                             "client keys)")
        if self.secret is not None and len(self.secret) < 16:
            raise ValueError(f"secret must have at least 16 bytes, got {len(self.secret)}")
        self._validate_keys()
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

    def _validate_keys(self) -> None:
        """Key ids well formed, each a :class:`ClientKey`, no secret held by two identities
        (whoever holds it could pose as either, e.g. claim the other's priority)."""
        owners: dict[bytes, str] = {}
        if self.secret is not None:
            owners[self.secret] = "the shared secret"
        for key_id, key in self.client_keys.items():
            check_key_id(key_id)
            if not isinstance(key, ClientKey):
                raise ValueError(f"client key {key_id!r}: expected a ClientKey, got "
                                 f"{type(key).__name__}")
            if key.secret in owners:
                raise ValueError(f"client key {key_id!r} has the same secret as "
                                 f"{owners[key.secret]}: its holder could pose as either")
            owners[key.secret] = f"client key {key_id!r}"
