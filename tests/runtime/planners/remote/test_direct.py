"""DirectPlanner: the thread-free blocking client training uses (127.0.0.1 only)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from edgerl.contract.config_groups import build
from edgerl.runtime.planners.protocol.framing import decode_array, encode_array
from edgerl.runtime.planners.remote.config import RemotePlannerError
from edgerl.runtime.planners.remote.direct import DirectPlanner
from edgerl.runtime.planners.server.server import PlannerServer, ServerConfig
from tests.helpers.planners import OBS_DIM, BatchAffinePlanner, FakeServer, expected_rows

SECRET = b"another-shared-secret-0123"


def pieces(n: int, rows: int) -> list[np.ndarray]:
    rng = np.random.default_rng(n)
    return [rng.normal(size=(rows, OBS_DIM)).astype(np.float32) for _ in range(n)]


@pytest.mark.parametrize("secret", [None, SECRET])
def test_plan_many_answers_every_piece_on_the_calling_thread(secret):
    before = threading.active_count()
    server = PlannerServer(BatchAffinePlanner(sleep_s=0.05), build(
        ServerConfig, port=0, obs_dim=OBS_DIM, secret=secret, max_pending_batches=2,
        max_batch_rows=16))
    host, port = server.start()
    try:
        with DirectPlanner(host, port, secret=secret) as client:
            assert threading.active_count() == before + 2  # the server's two, none of ours
            obs = pieces(5, 16)
            out = client.plan_many(obs)
            for o, a in zip(obs, out):
                np.testing.assert_array_equal(a, np.stack([expected_rows(r, "") for r in o]))
            # one piece computing (50 ms), 2 pending: the other 2 were refused and resent
            assert client.metrics()["batch_retries"] >= 1
    finally:
        server.stop()


def test_wrong_secret_and_missing_server_are_named_errors():
    server = PlannerServer(BatchAffinePlanner(), ServerConfig(port=0, secret=SECRET))
    host, port = server.start()
    try:
        with pytest.raises(RemotePlannerError, match="unauthorized"):
            DirectPlanner(host, port, secret=b"x" * 20, timeout_s=2.0).connect()
        with pytest.raises(RemotePlannerError, match="requires a shared secret"):
            DirectPlanner(host, port, timeout_s=2.0).connect()
    finally:
        server.stop()
    with pytest.raises(RemotePlannerError, match="unreachable"):
        DirectPlanner(host, port, timeout_s=0.5).connect()


def test_reconnects_after_a_server_restart():
    planner = BatchAffinePlanner()
    server = PlannerServer(planner, ServerConfig(port=0))
    host, port = server.start()
    client = DirectPlanner(host, port, timeout_s=3.0).connect()
    try:
        assert len(client.plan_many(pieces(1, 4))) == 1
        server.stop()
        server = PlannerServer(planner, ServerConfig(port=port))
        server.start()
        assert client.plan_many(pieces(2, 4))[1].shape == (4, 4, 2)
        assert client.metrics()["reconnects"] == 1
    finally:
        client.close()
        server.stop()


def test_a_wrongly_shaped_answer_is_refused():
    def respond(msg, conn):
        return [{"type": "chunk_batch", "id": msg["id"], "actions": encode_array(
            np.zeros((2, 3, 2), np.float32)), "t0": 0.0, "dt": 0.1, "obs_time": 0.0,
            "latency_s": 0.0}]

    server = FakeServer(respond)
    try:
        client = DirectPlanner(*server.address, timeout_s=2.0).connect()
        with pytest.raises(RemotePlannerError, match=r"malformed: actions \(2, 3, 2\)"):
            client.plan_many(pieces(1, 2))
        client.close()
    finally:
        server.stop()


def test_send_many_keeps_several_tickets_in_flight_and_files_answers_by_ticket():
    """send_many returns before any answer (the planner takes 50 ms per batch); receive in
    reverse order files the earlier tickets' answers under their own tickets."""
    server = PlannerServer(BatchAffinePlanner(sleep_s=0.05), build(
        ServerConfig, port=0, obs_dim=OBS_DIM, max_batch_rows=16, inline=True))
    host, port = server.start()
    try:
        with DirectPlanner(host, port, timeout_s=5.0) as client:
            obs = [pieces(k + 1, 8) for k in range(3)]  # tickets of 1, 2 and 3 pieces
            start = time.monotonic()
            tickets = [client.send_many(o) for o in obs]
            assert time.monotonic() - start < 0.05 and not any(t.done for t in tickets)
            out = client.receive(tickets[2])
            assert tickets[0].done and tickets[1].done  # answered before the last ticket
            for o, got in zip(obs, [client.receive(tickets[0]), client.receive(tickets[1]),
                                    out]):
                assert len(got) == len(o)
                for rows, a in zip(o, got):
                    np.testing.assert_array_equal(a, np.stack([expected_rows(r, "")
                                                               for r in rows]))
            assert client.metrics()["batches"] == 6 and not client._open
    finally:
        server.stop()


def test_tickets_in_flight_are_sent_again_after_a_lost_connection():
    planner = BatchAffinePlanner(sleep_s=0.2)
    server = PlannerServer(planner, ServerConfig(port=0, obs_dim=OBS_DIM))
    host, port = server.start()
    client = DirectPlanner(host, port, timeout_s=5.0).connect()
    try:
        obs = [pieces(1, 4), pieces(2, 4)]
        tickets = [client.send_many(o) for o in obs]
        server.stop()  # the planner was still computing: the answers are lost
        server = PlannerServer(planner, ServerConfig(port=port, obs_dim=OBS_DIM))
        server.start()
        later = client.receive(tickets[1])
        first = client.receive(tickets[0])
        for o, got in ((obs[0], first), (obs[1], later)):
            for rows, a in zip(o, got):
                np.testing.assert_array_equal(a, np.stack([expected_rows(r, "") for r in rows]))
        assert client.metrics()["reconnects"] == 1
    finally:
        client.close()
        server.stop()


def test_a_stopping_server_is_a_lost_connection_and_the_pieces_go_again():
    """The server's connection-level ``shutting_down`` (id -1) is answered by reconnecting
    and sending the unanswered pieces again, not by failing the ticket."""
    def respond(msg, conn):
        if conn == 0:  # the first connection's server is stopping
            return [{"type": "error", "id": -1, "code": "shutting_down",
                     "message": "the planner server is stopping"}, "close"]
        rows = decode_array(msg["obs"], "obs")
        return [{"type": "chunk_batch", "id": msg["id"], "actions": encode_array(
            np.stack([expected_rows(r, "") for r in rows])), "t0": 0.0, "dt": 0.1,
            "obs_time": 0.0, "latency_s": 0.0}]

    server = FakeServer(respond)
    try:
        with DirectPlanner(*server.address, timeout_s=3.0) as client:
            obs = pieces(1, 3)
            out = client.receive(client.send_many(obs))
            np.testing.assert_array_equal(out[0], np.stack([expected_rows(r, "")
                                                            for r in obs[0]]))
            assert client.metrics()["reconnects"] == 1 and server.connections == 2
    finally:
        server.stop()
