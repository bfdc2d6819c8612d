"""The serial link's options, records and errors (shared by the port and the transport).

:class:`SerialConfig` (port, handshake and reconnect timing), :class:`HelloInfo` (the
firmware's HELLO_ACK), :class:`StateSample` (one STATE), :class:`TransportStats` (counters and
round-trip percentiles), and the two errors a connect raises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgerl.contract.wire import Mode

__all__ = ["ByteFilter", "HelloInfo", "LinkRefused", "SerialConfig", "StateSample",
           "TransportStats", "TransportTimeout", "host_us"]

#: A byte hook (fault injection): bytes in, bytes out.
ByteFilter = Callable[[bytes], bytes]


class LinkRefused(ConnectionError):
    """The firmware answered HELLO with a different schema hash or protocol version."""


class TransportTimeout(TimeoutError):
    """No answer from the firmware in time."""


@dataclass
class SerialConfig:
    """Serial link options.

    Attributes:
        port: Device path (a pty slave printed by the host firmware, /dev/ttyACM0, ...).
        baudrate: Ignored by ptys and USB-CDC; used by real UARTs.
        hello_timeout_s: Wait for HELLO_ACK per attempt (s).
        hello_attempts: HELLO attempts per connect.
        reconnect: Reopen the port and redo the handshake after a failure.
        reconnect_backoff_s: First / maximum wait between reconnect attempts (s).
        read_timeout_s: Reader thread poll period (s); bounds close() latency.
        rtt_capacity: Round-trip samples kept for percentiles.
    """

    port: str
    baudrate: int = 1_000_000
    hello_timeout_s: float = 0.3
    hello_attempts: int = 5
    reconnect: bool = True
    reconnect_backoff_s: tuple[float, float] = (0.02, 0.5)
    read_timeout_s: float = 0.02
    rtt_capacity: int = 100_000

    def __post_init__(self) -> None:
        if not self.port:
            raise ValueError("SerialConfig.port is empty")
        if self.hello_timeout_s <= 0 or self.hello_attempts < 1:
            raise ValueError("hello_timeout_s must be > 0 and hello_attempts >= 1")


@dataclass(frozen=True)
class HelloInfo:
    """What the firmware said in HELLO_ACK."""

    schema_hash: int
    proto_version: int
    mode: Mode
    n_cmd: int
    has_policy: bool
    watchdog_ms: int


@dataclass(frozen=True)
class StateSample:
    """One STATE from the firmware.

    Attributes:
        t_host: Host monotonic time when it was parsed (s).
        fw_time_us: Firmware clock (us, wraps at 2^32).
        setpoint_seq: Last applied setpoint.
        mode: Firmware mode.
        state: ``(n_state,)`` float32 plant state echo (observation units).
        cmd: ``(n_cmd,)`` float32 command being applied (action units).
        sensor_age_us: Age of ``state`` at send time (us).
    """

    t_host: float
    fw_time_us: int
    setpoint_seq: int
    mode: Mode
    state: np.ndarray
    cmd: np.ndarray
    sensor_age_us: int

    @property
    def sensor_stamp_us(self) -> int:
        """Firmware time (us, wraps at 2^32) at which ``state`` was sensed: the same in every
        STATE that repeats one plant state, new with each sensor sample (the plant state's
        identity, exact on the firmware's own clock)."""
        return (self.fw_time_us - self.sensor_age_us) & 0xFFFFFFFF


@dataclass
class TransportStats:
    """Link counters and round-trip percentiles (us)."""

    connected: bool
    connects: int
    link_failures: int
    tx_frames: int
    rx_frames: int
    bad_frames: int
    lost_frames: int
    setpoints_sent: int
    setpoints_acked: int
    rtt_samples: int
    rtt_p50_us: float
    rtt_p99_us: float
    rtt_max_us: float

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)



def host_us(t: float) -> int:
    """Host time ``t`` (s) as the wire's wrapping uint32 microseconds."""
    return int(t * 1e6) & 0xFFFFFFFF
