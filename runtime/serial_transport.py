"""``SerialTransport``: the host side of the serial link to the edgerl firmware (pyserial).

Connect = open the port, start a reader thread, send HELLO (schema hash + protocol version)
and wait for HELLO_ACK; a hash/version mismatch raises :class:`LinkRefused`. Then:
``send_setpoint(q)`` (absolute per-joint command, seq + host timestamp), ``latest_state()``
(newest STATE: plant state echo, applied command, firmware time), ``latest_status()``
(firmware counters), e-stop / clear / heartbeat / mode. The firmware echoes each applied
setpoint's host timestamp in STATE, which gives the command round-trip time. If the port
fails (cable pulled, firmware restarted) the reader reconnects with backoff when
``reconnect`` is set. :class:`SerialCommandSink` adapts it to the EditLoop's
``CommandSink``.

``tx_filter`` / ``rx_filter`` are optional byte hooks (one frame per ``tx_filter`` call,
arbitrary chunks for ``rx_filter``) used by the HIL harness to inject faults.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from edgerl.contract.wire import (
    CLEAR_ESTOP_TOKEN,
    MAX_CHUNK_FLOATS,
    MAX_CMD,
    MAX_INTENT,
    PROTOCOL_VERSION,
    FrameParser,
    Mode,
    Msg,
    decode,
    encode,
    schema_hash,
)
from edgerl.runtime.serial_port import SerialPort
from edgerl.runtime.serial_types import (
    ByteFilter,
    HelloInfo,
    LinkRefused,
    SerialConfig,
    StateSample,
    TransportStats,
    TransportTimeout,
    host_us,
)

# The link's records and errors are part of this module's API (defined in serial_types).
__all__ = [
    "HelloInfo",
    "LinkRefused",
    "SerialCommandSink",
    "SerialConfig",
    "SerialTransport",
    "StateSample",
    "TransportStats",
    "TransportTimeout",
]

log = logging.getLogger(__name__)


class SerialTransport(SerialPort):
    """Host end of the firmware link (protocol over a :class:`SerialPort`). Thread-safe
    senders; one reader thread.

    Args:
        config: Port and timing options.
        tx_filter: Optional hook applied to each outgoing frame (fault injection).
        rx_filter: Optional hook applied to each received chunk (fault injection).
        on_state: Optional callback per STATE (called in the reader thread; keep it short).
        on_message: Optional callback ``(msg, t_host)`` for every other message this class
            does not consume itself (EDIT_TICK telemetry of the fast loop...); reader thread.
    """

    def __init__(self, config: SerialConfig, tx_filter: ByteFilter | None = None,
                 rx_filter: ByteFilter | None = None,
                 on_state: Callable[[StateSample], None] | None = None,
                 on_message: Callable[[Msg, float], None] | None = None) -> None:
        super().__init__(config, tx_filter)
        self.rx_filter = rx_filter
        self.on_state = on_state
        self.on_message = on_message
        self.parser = FrameParser()
        self.hello: HelloInfo | None = None
        self._tx_seq = 0
        self._setpoint_seq = 0
        self._state: StateSample | None = None
        self._status: dict[str, Any] | None = None
        #: The newest STATUS that answered a request (``request_us`` != 0): an unsolicited
        #: STATUS (a watchdog trip, a mode change) arriving right after the answer must not
        #: hide it from the waiting :meth:`request_status`.
        self._status_answer: dict[str, Any] | None = None
        self._status_count = 0
        self._status_req = 0
        self._ack: Msg | None = None
        self._acked_seqs: deque[int] = deque(maxlen=config.rtt_capacity)
        self._last_acked = -1
        self._rtt_us: deque[int] = deque(maxlen=config.rtt_capacity)
        self._sent_t: deque[tuple[int, float]] = deque(maxlen=config.rtt_capacity)
        self.connects = 0
        self.tx_frames = 0
        self.setpoints_sent = 0

    # --- link (protocol side of the port) -------------------------------------------------
    def _on_open(self) -> None:
        self.parser.reset()

    def _handshake(self) -> HelloInfo:
        for attempt in range(self.cfg.hello_attempts):
            with self._cv:
                self._ack = None
            self._send("HELLO", schema_hash=schema_hash(), proto_version=PROTOCOL_VERSION,
                       host_time_us=host_us(time.perf_counter()))
            with self._cv:
                self._cv.wait_for(lambda: self._ack is not None, self.cfg.hello_timeout_s)
                ack = self._ack
            if ack is None:
                log.debug("HELLO attempt %d: no answer", attempt + 1)
                continue
            if not ack["accepted"]:
                raise LinkRefused(
                    f"firmware refused the link: its schema hash 0x{ack['schema_hash']:08x} "
                    f"v{ack['proto_version']}, ours 0x{schema_hash():08x} v{PROTOCOL_VERSION}"
                    " (rebuild the firmware from the same edgerl version)")
            self.hello = HelloInfo(ack["schema_hash"], ack["proto_version"], Mode(ack["mode"]),
                                   ack["n_cmd"], bool(ack["has_policy"]), ack["watchdog_ms"])
            self._linked = True
            self.connects += 1
            log.debug("linked to firmware on %s: %s", self.cfg.port, self.hello)
            return self.hello
        raise TransportTimeout(f"no HELLO_ACK from {self.cfg.port} after "
                               f"{self.cfg.hello_attempts} attempts")

    def _send(self, name: str, **fields: Any) -> bool:
        with self._tx_lock:
            frame = encode(name, self._tx_seq, **fields)
            self._tx_seq = (self._tx_seq + 1) & 0xFFFF
            ok = self._write(frame)
            self.tx_frames += 1
        return ok

    def send_setpoint(self, q: Sequence[float] | np.ndarray) -> int:
        """Send an absolute command for joints ``0..len(q)-1``; returns its setpoint seq
        (-1 if the link is down). It is stamped with the send time (host monotonic us),
        which the firmware echoes in STATE for the round-trip time."""
        if not self.connected:
            return -1
        q = np.asarray(q, np.float32).reshape(-1)
        if q.shape[0] > MAX_CMD or q.shape[0] == 0:
            raise ValueError(f"setpoint has {q.shape[0]} joints, must be 1..{MAX_CMD}")
        with self._tx_lock:
            self._setpoint_seq += 1
            seq = self._setpoint_seq
        now = time.perf_counter()
        stamp = host_us(now)
        ok = self._send("SETPOINT", seq=seq, host_time_us=stamp, n=q.shape[0], q=q.tolist())
        if ok:
            self.setpoints_sent += 1
            self._sent_t.append((seq, now))
        return seq if ok else -1

    def estop(self, reason: int = 1) -> bool:
        """Latch the firmware e-stop (sent even while not linked, if the port is open)."""
        return self._send("ESTOP", reason=reason)

    def clear_estop(self) -> bool:
        """Clear a latched e-stop; the firmware goes to SAFE until the next setpoint."""
        return self._send("CLEAR_ESTOP", token=CLEAR_ESTOP_TOKEN)

    def heartbeat(self) -> bool:
        return self._send("HEARTBEAT", time_us=host_us(time.perf_counter()))

    def set_mode(self, mode: Mode) -> bool:
        return self._send("SET_MODE", mode=int(mode))

    def send_chunk(self, actions: np.ndarray, t0: float, dt: float, obs_time: float,
                   step0: int = 0, intent: np.ndarray | None = None) -> bool:
        """Send an action chunk to the firmware's fast loop (``Mode.FAST_LOOP``).

        Args:
            actions: ``(H, A)`` rows, ``H * A <= MAX_CHUNK_FLOATS``.
            t0: Time of row 0 (host monotonic s, ``time.perf_counter``); ``obs_time`` the
                planner observation's (NaN: ``t0``). The firmware maps both to its clock by
                its receive time minus the send time stamped here.
            dt: Seconds between rows. step0: the chunk's step0 (echoed in EDIT_TICK).
            intent: The planner's ``(I,)`` intent, ``I <= MAX_INTENT`` (``None``: none).

        Returns False if the link is down; ``ValueError`` for a chunk that does not fit.
        """
        a = np.asarray(actions, np.float32)
        if a.ndim != 2 or a.shape[0] < 1 or a.size > MAX_CHUNK_FLOATS or not dt > 0:
            raise ValueError(f"chunk of shape {a.shape} (dt {dt}) does not fit a CHUNK "
                             f"message: (H, A) with H * A <= {MAX_CHUNK_FLOATS}, dt > 0")
        z = np.zeros(0, np.float32) if intent is None else np.asarray(intent, np.float32)
        if z.ndim != 1 or z.size > MAX_INTENT:
            raise ValueError(f"intent of shape {z.shape} does not fit a CHUNK message: (I,) "
                             f"with I <= {MAX_INTENT}")
        ref = t0 if not np.isfinite(obs_time) else obs_time
        return self._send("CHUNK", step0=int(step0) & 0xFFFFFFFF,
                          host_time_us=host_us(time.perf_counter()), t0_us=host_us(t0),
                          dt_us=max(1, round(dt * 1e6)), obs_time_us=host_us(ref),
                          horizon=a.shape[0], n=a.shape[1], actions=a.reshape(-1),
                          intent_n=z.size, intent=z)

    def request_status(self, timeout_s: float = 0.2) -> dict[str, Any]:
        """Ask for STATUS and wait for the answer to this request (its ``request_us`` echoes
        a request id sent as GET_STATUS.host_time_us); raises TransportTimeout."""
        with self._tx_lock:
            self._status_req = (self._status_req % 0xFFFFFFFE) + 1  # never 0 (= unsolicited)
            req = self._status_req
        self._send("GET_STATUS", host_time_us=req)

        def answered() -> bool:
            return (self._status_answer is not None
                    and self._status_answer["request_us"] == req)
        with self._cv:
            if not self._cv.wait_for(answered, timeout_s):
                raise TransportTimeout(f"no STATUS from {self.cfg.port} in {timeout_s} s")
            assert self._status_answer is not None
            return dict(self._status_answer)

    # --- receiving ----------------------------------------------------------------------------
    def latest_state(self) -> StateSample | None:
        with self._cv:
            return self._state

    def latest_status(self) -> dict[str, Any] | None:
        with self._cv:
            return None if self._status is None else dict(self._status)

    def wait_state(self, setpoint_seq: int, timeout_s: float) -> StateSample | None:
        """Wait until a STATE reports ``setpoint_seq`` (or later) applied."""
        def done() -> bool:
            return self._state is not None and self._state.setpoint_seq >= setpoint_seq
        with self._cv:
            self._cv.wait_for(done, timeout_s)
            return self._state if done() else None

    def sent_times(self) -> dict[int, float]:
        """Setpoint seq -> host send time (s) for the recent setpoints (bounded history)."""
        with self._tx_lock:
            return dict(self._sent_t)

    def acked_setpoints(self) -> set[int]:
        """Setpoint seqs the firmware reported as applied (bounded history)."""
        with self._cv:
            return set(self._acked_seqs)

    def _on_bytes(self, data: bytes) -> None:
        if self.rx_filter is not None:
            data = self.rx_filter(data)
        now = time.perf_counter()
        for frame in self.parser.feed(data):
            msg = decode(frame)
            if msg is not None:
                self._on_msg(msg, now)

    def _on_msg(self, msg: Msg, now: float) -> None:
        name = msg.name
        if name == "STATE":
            f = msg.fields
            sample = StateSample(
                t_host=now, fw_time_us=f["fw_time_us"], setpoint_seq=f["setpoint_seq"],
                mode=Mode(f["mode"]) if f["mode"] in Mode._value2member_map_ else Mode.IDLE,
                state=np.asarray(f["state"][:f["n_state"]], np.float32),
                cmd=np.asarray(f["cmd"][:f["n_cmd"]], np.float32),
                sensor_age_us=f["sensor_age_us"])
            with self._cv:
                if f["setpoint_seq"] != self._last_acked and f["setpoint_seq"] > 0:
                    self._last_acked = f["setpoint_seq"]
                    self._acked_seqs.append(f["setpoint_seq"])
                    self._rtt_us.append((host_us(now) - f["host_time_us"]) & 0xFFFFFFFF)
                self._state = sample
                self._cv.notify_all()
            if self.on_state is not None:
                try:
                    self.on_state(sample)
                except Exception:  # a bad callback must not kill the reader thread
                    log.exception("on_state callback failed")
        elif name == "STATUS":
            with self._cv:
                self._status = dict(msg.fields)
                if self._status["request_us"]:
                    self._status_answer = self._status
                self._status_count += 1
                self._cv.notify_all()
        elif name == "HELLO_ACK":
            with self._cv:
                self._ack = msg
                self._cv.notify_all()
        elif self.on_message is not None:
            try:
                self.on_message(msg, now)
            except Exception:  # a bad callback must not kill the reader thread
                log.exception("on_message callback failed")

    # --- stats --------------------------------------------------------------------------------
    def stats(self) -> TransportStats:
        with self._cv:
            rtt = np.asarray(self._rtt_us, np.float64)
            acked = len(self._acked_seqs)
        p50, p99, mx = (np.percentile(rtt, 50), np.percentile(rtt, 99), rtt.max()) \
            if rtt.size else (float("nan"),) * 3
        ps = self.parser.stats
        return TransportStats(
            connected=self.connected, connects=self.connects, link_failures=self.link_failures,
            tx_frames=self.tx_frames, rx_frames=ps.frames_ok, bad_frames=ps.bad_frames,
            lost_frames=ps.lost_frames, setpoints_sent=self.setpoints_sent,
            setpoints_acked=acked, rtt_samples=int(rtt.size), rtt_p50_us=float(p50),
            rtt_p99_us=float(p99), rtt_max_us=float(mx))


class SerialCommandSink:
    """EditLoop ``CommandSink`` over a :class:`SerialTransport`: each tick's command becomes
    one SETPOINT; returns False while the link is down (the loop counts ``transport_down``).
    """

    def __init__(self, transport: SerialTransport) -> None:
        self.transport = transport

    def __call__(self, command: np.ndarray, t: float) -> bool:
        return self.transport.send_setpoint(command) >= 0
