"""A planner in a ``spawn`` subprocess, for :class:`~.client.PlannerClient`'s ``process`` mode.

The child builds the planner from a ``"module:function"`` factory and answers requests over a
local pipe as raw bytes (``struct`` header + float32 array; no pickle on the data path):
``H`` hello (the planner's info), ``R`` request, ``C`` chunk (its rows, then its planner
intent, if any), ``E`` error, ``Q`` quit.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import signal
import struct
import threading
import time
from typing import Any

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.planner import PlannerInfo
from edgerl.runtime.planners.client.config import PlannerClientConfig

__all__ = ["PlannerCrashed"]

_REQ = struct.Struct("<dII")  # obs time, obs elements, instruction bytes
_CHUNK = struct.Struct("<ddqdIII")  # t0, dt, step0, obs_time, H, A, intent size I
#: horizon, action_dim, dt_s, period_s, expected_latency_s, intent_dim
_HELLO = struct.Struct("<IIdddI")
#: While waiting for the child, the parent's thread wakes this often to notice a stop (s).
STOP_POLL_S = 0.25


class PlannerCrashed(RuntimeError):
    """The planner process died or stopped answering."""


class _Stopped(Exception):
    pass


def _resolve(factory: str):
    module, _, name = factory.partition(":")
    if not module or not name:
        raise ValueError(f"planner factory must be 'module:function', got {factory!r}")
    return getattr(importlib.import_module(module), name)


def _encode_chunk(chunk: ActionChunk) -> bytes:
    intent = b"" if chunk.intent is None else chunk.intent.tobytes()
    return b"C" + _CHUNK.pack(chunk.t0, chunk.dt, chunk.step0, chunk.obs_time, chunk.horizon,
                              chunk.action_dim, chunk.intent_dim) + chunk.actions.tobytes() \
        + intent


def _decode_chunk(msg: bytes, source: str) -> ActionChunk:
    t0, dt, step0, obs_time, h, a, i = _CHUNK.unpack_from(msg, 1)
    actions = np.frombuffer(msg, np.float32, h * a, 1 + _CHUNK.size).reshape(h, a)
    intent = np.frombuffer(msg, np.float32, i, 1 + _CHUNK.size + 4 * h * a) if i else None
    return ActionChunk(actions=actions, t0=t0, dt=dt, step0=step0, obs_time=obs_time,
                       source=source, intent=intent)


def _child_main(conn, factory: str, kwargs: dict[str, Any]) -> None:
    """Planner subprocess: hello, then answer requests until EOF or ``Q``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops us
    if hasattr(os, "sched_setscheduler"):  # never inherit a real-time policy from the client
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    planner = _resolve(factory)(**kwargs)
    i = planner.info
    try:
        conn.send_bytes(b"H" + _HELLO.pack(i.horizon, i.action_dim, i.dt_s, i.period_s,
                                           i.expected_latency_s, getattr(i, "intent_dim", 0)))
    except OSError:  # the parent went away during our start
        return
    while True:
        try:
            msg = conn.recv_bytes()
        except (EOFError, OSError):
            return
        if msg[:1] == b"Q":
            return
        now, n, m = _REQ.unpack_from(msg, 1)
        obs = np.frombuffer(msg, np.float32, n, 1 + _REQ.size)
        start = 1 + _REQ.size + 4 * n
        text = msg[start:start + m].decode("utf-8")
        try:
            reply = _encode_chunk(planner.plan(obs, text, now))
        except Exception as exc:  # reported to the parent, counted as an error
            reply = b"E" + f"{type(exc).__name__}: {exc}".encode()
        try:
            conn.send_bytes(reply)
        except OSError:  # the parent closed the pipe (stop, or it gave up on us)
            return


class _ProcessPlanner:
    """Parent side of a planner subprocess."""

    def __init__(self, factory: str, cfg: PlannerClientConfig, stop: threading.Event) -> None:
        _resolve(factory)  # fail early (in the parent) on a bad name
        self.factory, self.cfg, self._stop = factory, cfg, stop
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=_child_main, args=(child, factory, cfg.factory_kwargs),
                                name="edgerl-planner", daemon=True)
        self.proc.start()
        child.close()
        try:
            msg = self._wait(cfg.start_timeout_s, "start")
        except BaseException:
            self.close(kill=True)
            raise
        if msg[:1] != b"H":
            self.close(kill=True)
            raise PlannerCrashed(f"planner process sent {msg[:1]!r} instead of hello")
        h, a, dt, period, lat, intent_dim = _HELLO.unpack_from(msg, 1)
        self.info = PlannerInfo(horizon=h, action_dim=a, dt_s=dt, period_s=period,
                                expected_latency_s=lat, intent_dim=intent_dim)

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    def _wait(self, timeout: float, what: str) -> bytes:
        """The child's next message, waiting at most ``timeout`` s. One blocking wait on the
        pipe and the process's sentinel, with the GIL released, wakes this thread when the
        answer comes or the child dies; it also wakes every :data:`STOP_POLL_S` to notice a
        stop. (It polled every 20 ms before: 50 wake-ups a second in the loop's process, each
        taking the GIL, which the loop then had to win back.)"""
        deadline = time.monotonic() + timeout
        ready: list[Any] = []
        while self.conn not in ready:
            if self._stop.is_set():
                raise _Stopped()
            left = deadline - time.monotonic()
            if left <= 0:
                raise PlannerCrashed(f"planner process gave no answer within {timeout:.1f} s "
                                     f"({what})")
            ready = mp_connection.wait([self.conn, self.proc.sentinel],
                                       timeout=min(left, STOP_POLL_S))
            if self.conn not in ready and self.proc.sentinel in ready:
                self.proc.join(1.0)
                raise PlannerCrashed(f"planner process exited (code {self.proc.exitcode}) "
                                     f"during {what}")
        try:
            return self.conn.recv_bytes()
        except (EOFError, OSError) as exc:
            raise PlannerCrashed(f"planner process pipe closed during {what}") from exc

    def plan(self, obs: np.ndarray, text: str, now: float) -> ActionChunk:
        raw = text.encode("utf-8")
        try:
            self.conn.send_bytes(b"R" + _REQ.pack(now, obs.size, len(raw)) + obs.tobytes() + raw)
        except (BrokenPipeError, OSError) as exc:
            raise PlannerCrashed(f"planner process pipe broken: {exc}") from exc
        msg = self._wait(self.cfg.hang_timeout_s, "plan")
        if msg[:1] == b"E":
            raise RuntimeError(msg[1:].decode("utf-8", "replace"))
        return _decode_chunk(msg, source=f"process:{self.factory}")

    def close(self, kill: bool = False) -> None:
        """Ask the process to quit (1 s), then kill it; ``kill=True`` kills at once."""
        try:
            if self.proc.is_alive() and not kill:
                self.conn.send_bytes(b"Q")
                self.proc.join(1.0)
        except (BrokenPipeError, OSError):
            pass
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(2.0)
        self.conn.close()
