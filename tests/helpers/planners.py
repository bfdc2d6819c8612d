"""Real tiny planners, servers started for a test (``ServedPlanners``), raw-socket helpers and
a scripted fake server for planner-serving tests.

Everything binds 127.0.0.1 and every loop is bounded in count and time.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import msgpack
import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.config_groups import build
from edgerl.contract.planner import PlannerHealth, PlannerInfo
from edgerl.runtime.planners.protocol.framing import (
    PROTOCOL_VERSION,
    encode_array,
    encode_frame,
    recv_frame,
)
from edgerl.runtime.planners.server.server import PlannerServer, ServerConfig

H, A, OBS_DIM = 4, 2, 3
INFO = PlannerInfo(horizon=H, action_dim=A, dt_s=0.1, period_s=0.2, expected_latency_s=0.001)


def expected_rows(obs: np.ndarray, instruction: str) -> np.ndarray:
    """What :class:`AffinePlanner` answers: row i = obs[:A] + i + len(instruction)."""
    return (np.asarray(obs, np.float32)[:A][None, :] + np.arange(H, dtype=np.float32)[:, None]
            + len(instruction))


class AffinePlanner:
    """A real (tiny) planner with optional compute time (``sleep_s`` per call,
    ``row_s`` per batch row) and a record of every batch it was given.

    Args:
        sleep_s: Seconds each call takes (``plan`` calls from number ``slow_from_call + 1``
            on; every ``plan_batch`` call).
        row_s: Extra seconds per observation row.
        slow_from_call: ``plan`` calls answered at once before the slow ones start.

    Attributes:
        calls: ``plan`` calls so far (failed ones included).
        fail_next: Set it to make the next ``plan`` call raise (``model exploded``).
    """

    def __init__(self, sleep_s: float = 0.0, row_s: float = 0.0,
                 slow_from_call: int = 0) -> None:
        self.info = INFO
        self.sleep_s = sleep_s
        self.row_s = row_s
        self.slow_from_call = slow_from_call
        self.release = threading.Event()  # set at teardown so sleeps end early
        self.batches: list[list[str]] = []  # instructions of each call, in call order
        self.rows = 0
        self.calls = 0
        self.fail_next = False

    def _work(self, rows: int, *, fast: bool = False) -> None:
        self.rows += rows
        cost = 0.0 if fast else self.sleep_s + self.row_s * rows
        if cost:
            self.release.wait(cost)

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        self.calls += 1
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("model exploded")
        self.batches.append([instruction])
        self._work(1, fast=self.calls <= self.slow_from_call)
        return ActionChunk(actions=expected_rows(observation, instruction), t0=now,
                           dt=INFO.dt_s, obs_time=now, source="affine")

    def health(self) -> PlannerHealth:
        return PlannerHealth.OK


class BatchAffinePlanner(AffinePlanner):
    """:class:`AffinePlanner` that also answers many observations in one call."""

    def plan_batch(self, observations: np.ndarray, instructions: list[str],
                   now: float) -> np.ndarray:
        self.batches.append(list(instructions))
        self._work(len(instructions))
        return np.stack([expected_rows(o, t) for o, t in zip(observations, instructions)])


INTENT_DIM = 2
INTENT_INFO = dataclasses.replace(INFO, intent_dim=INTENT_DIM)


def expected_intent(obs: np.ndarray) -> np.ndarray:
    """What :class:`IntentAffinePlanner` exports beside its chunk: ``tanh(obs[:I])``."""
    return np.tanh(np.asarray(obs, np.float32)[:INTENT_DIM]).astype(np.float32)


class IntentAffinePlanner(BatchAffinePlanner):
    """:class:`BatchAffinePlanner` whose chunks carry a planner intent
    (:func:`expected_intent`); ``plan_batch`` answers ``(chunks, intent (n, I))``."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.info = INTENT_INFO

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        chunk = super().plan(observation, instruction, now)
        return dataclasses.replace(chunk, intent=expected_intent(observation))

    def plan_batch(self, observations: np.ndarray, instructions: list[str],
                   now: float) -> tuple[np.ndarray, np.ndarray]:
        chunks = super().plan_batch(observations, instructions, now)
        return chunks, np.stack([expected_intent(o) for o in observations])


class ServedPlanners:
    """Planner servers a test starts, all stopped at its teardown.

    ``served(planner, **config)`` starts a :class:`PlannerServer` for ``planner`` on a free
    loopback port (``obs_dim`` :data:`OBS_DIM` unless given) and returns it. :meth:`stop_all`
    closes :attr:`connections` (raw sockets, clients: anything with ``close()``), then sets
    each planner's ``release`` (no sleep outlives the test) and stops its server.
    """

    def __init__(self) -> None:
        self.started: list[tuple[PlannerServer, AffinePlanner]] = []
        self.connections: list[Any] = []

    def __call__(self, planner: AffinePlanner, **cfg: Any) -> PlannerServer:
        config = build(ServerConfig, **{"port": 0, "obs_dim": OBS_DIM, **cfg})
        server = PlannerServer(planner, config)
        server.start()
        self.started.append((server, planner))
        return server

    def stop_all(self) -> list[PlannerServer]:
        """Close the connections, stop every server; returns the servers, stopped."""
        for c in self.connections:
            c.close()
        for server, planner in self.started:
            planner.release.set()
            server.stop()
        return [server for server, _ in self.started]


def plan_msg(req_id: int, obs: np.ndarray, **extra: Any) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "type": "plan", "id": req_id,
            "obs": encode_array(np.asarray(obs, np.float32)), "obs_time": 1.0,
            "instruction": "", "deadline_s": 0.0, **extra}


def batch_msg(req_id: int, obs: np.ndarray, texts: list[str], **extra: Any) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "type": "plan_batch", "id": req_id,
            "obs": encode_array(np.asarray(obs, np.float32)), "instructions": texts,
            "obs_time": 0.0, "deadline_s": 0.0, **extra}


def raw_connect(address: tuple[str, int], timeout_s: float = 3.0) -> socket.socket:
    return socket.create_connection(address, timeout=timeout_s)


def raw_reply(sock: socket.socket) -> dict[str, Any]:
    body = recv_frame(sock)
    assert body is not None, "server closed instead of replying"
    return msgpack.unpackb(body, raw=False)


def closed_by_peer(sock: socket.socket, within_s: float) -> bool:
    """Whether the server closes ``sock`` within ``within_s`` (replies are skipped)."""
    sock.settimeout(within_s)
    try:
        while True:
            if recv_frame(sock) is None:
                return True
    except (TimeoutError, OSError):
        return False


class FakeServer:
    """A scripted planner server on 127.0.0.1 for client tests: answers ``health`` with
    :data:`INFO`; for every ``plan`` it sends what ``respond(msg, conn_index)`` returns (maps
    are framed, bytes go raw, the string ``"close"`` closes the connection)."""

    def __init__(self, respond: Callable[[dict, int], list[Any]]) -> None:
        self.respond = respond
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.address = self.listener.getsockname()[:2]
        self.stop_event = threading.Event()
        self.threads: list[threading.Thread] = []
        self.connections = 0
        self.plans: list[dict] = []
        self._spawn(self._accept)

    def _spawn(self, target: Callable, *args: Any) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def _accept(self) -> None:
        while not self.stop_event.is_set():
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, OSError):
                continue
            index, self.connections = self.connections, self.connections + 1
            self._spawn(self._serve, conn, index)  # counted before it can answer anything

    def _serve(self, conn: socket.socket, index: int) -> None:
        conn.settimeout(0.1)
        with conn:
            while not self.stop_event.is_set():
                try:
                    body = recv_frame(conn)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if body is None:
                    return
                msg = msgpack.unpackb(body, raw=False)
                if msg["type"] == "health":
                    conn.sendall(encode_frame({"type": "health", "id": msg["id"], "state": "ok",
                                               "info": dataclasses.asdict(INFO),
                                               "metrics": {}}))
                    continue
                self.plans.append(msg)
                for item in self.respond(msg, index):
                    if item == "close":
                        return
                    conn.sendall(item if isinstance(item, bytes) else encode_frame(item))

    def stop(self) -> None:
        self.stop_event.set()
        self.listener.close()
        for t in self.threads:
            t.join(2.0)


def chunk_reply(msg: dict, **override: Any) -> dict[str, Any]:
    """A valid ``chunk`` answer to ``msg`` (fields overridable)."""
    obs = np.frombuffer(msg["obs"]["data"], "<f4")
    now = msg["obs_time"]
    reply = {"type": "chunk", "id": msg["id"], "actions": encode_array(expected_rows(obs, "")),
             "t0": now, "dt": INFO.dt_s, "step0": -1, "obs_time": now, "source": "fake",
             "latency_s": 0.0}
    reply.update(override)
    return reply


def wait_until(predicate: Callable[[], bool], timeout_s: float, poll_s: float = 0.01) -> bool:
    """Poll ``predicate`` until true or ``timeout_s`` passed; returns its last value."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(poll_s)
    return predicate()
