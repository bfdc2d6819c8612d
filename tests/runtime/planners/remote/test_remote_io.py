"""RemotePlanner against a misbehaving server: bad replies, absurd timestamps,
unsolicited chunks, a server that stops answering, restarts with backoff. The server is a
scripted fake on 127.0.0.1 (tests.helpers.planners.FakeServer)."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.contract.planner import PlannerHealth
from edgerl.runtime.planners.protocol.framing import encode_array
from edgerl.runtime.planners.remote.planner import RemotePlanner
from tests.helpers.planners import OBS_DIM, FakeServer, chunk_reply, wait_until


@pytest.fixture
def fake():
    """``fake(respond, **client_cfg)`` -> (FakeServer, started RemotePlanner); stopped after."""
    made: list[tuple[FakeServer, RemotePlanner]] = []

    def _fake(respond, **cfg):
        server = FakeServer(respond)
        host, port = server.address
        client = RemotePlanner(host=host, port=port, connect_timeout_s=3.0, **cfg).start()
        made.append((server, client))
        return server, client

    yield _fake
    for server, client in made:
        client.close()
        server.stop()


def obs(value: float) -> np.ndarray:
    return np.full(OBS_DIM, value, np.float32)


def test_a_bad_reply_neither_kills_the_receiver_nor_hides_the_next_chunk(fake):
    def respond(msg, conn):
        if msg["obs_time"] == 10.0:  # an unhashable id, then a chunk without fields
            return [chunk_reply(msg, id=[msg["id"]]), {"type": "chunk", "id": msg["id"]}]
        return [chunk_reply(msg)]

    _server, client = fake(respond)
    client.request(obs(1.0), "", now=10.0)
    assert wait_until(lambda: client.metrics().get("rejected_malformed", 0) == 1, 2.0)
    client.request(obs(1.0), "", now=11.0)
    assert wait_until(lambda: client.latest() is not None, 2.0)
    assert client.latest().obs_time == 11.0
    m = client.metrics()
    assert m["rejected_bad_id"] == 1 and m["rejected_malformed"] == 1, m
    assert all(t.is_alive() for t in client._threads)
    assert client.health() in (PlannerHealth.OK, PlannerHealth.SLOW)  # answering again


@pytest.mark.parametrize("field,value,reason", [
    ("obs_time", 1e300, "rejected_obs_time"),
    ("obs_time", 3600.0, "rejected_obs_time"),
    ("t0", 3600.0, "rejected_t0"),
])
def test_replies_with_timestamps_far_ahead_are_rejected(fake, field, value, reason):
    def respond(msg, conn):
        if msg["obs_time"] == 1.0:  # the first request gets the absurd chunk
            bad = msg["obs_time"] + value if value < 1e300 else value
            return [chunk_reply(msg, **{field: bad, "t0": bad} if field == "obs_time"
                                else chunk_reply(msg, t0=bad))]
        return [chunk_reply(msg)]

    _server, client = fake(respond)
    client.request(obs(0.0), "", now=1.0)
    assert wait_until(lambda: client.metrics().get(reason, 0) == 1, 2.0), client.metrics()
    assert client.latest() is None
    client.request(obs(0.0), "", now=2.0)
    assert wait_until(lambda: client.latest() is not None, 2.0)
    assert client.latest().obs_time == 2.0  # not pinned by the absurd one


def test_unsolicited_and_wrongly_shaped_chunks_are_rejected(fake):
    def respond(msg, conn):
        wrong_shape = chunk_reply(msg, actions=encode_array(np.zeros((3, 2), np.float32)))
        return [chunk_reply(msg, id=999), wrong_shape]

    _server, client = fake(respond)
    client.request(obs(0.0), "", now=1.0)
    assert wait_until(lambda: client.metrics().get("rejected_shape", 0) == 1, 2.0)
    assert client.metrics()["rejected_unsolicited"] == 1 and client.latest() is None


def test_health_is_dead_when_the_server_stops_answering(fake):
    _server, client = fake(lambda msg, conn: [], dead_after_s=0.4)
    assert client.health() is PlannerHealth.OK
    client.request(obs(0.0), "", now=1.0)
    assert wait_until(lambda: client.health() is PlannerHealth.SLOW, 0.3)
    assert wait_until(lambda: client.health() is PlannerHealth.DEAD, 1.0)


def test_reconnects_after_a_bad_reply_and_a_drop(fake):
    def respond(msg, conn):
        if conn == 0:
            return [chunk_reply(msg, id=[1]), "close"]
        return [chunk_reply(msg)]

    server, client = fake(respond, reconnect_s=0.05)
    client.request(obs(0.0), "", now=1.0)
    assert wait_until(lambda: server.connections == 2, 2.0)
    assert wait_until(lambda: client.health() is PlannerHealth.OK, 2.0)
    client.request(obs(0.0), "", now=2.0)
    assert wait_until(lambda: client.latest() is not None, 2.0)
    assert client.latest().obs_time == 2.0 and client.metrics()["reconnects"] == 1


def test_reconnect_attempts_back_off(fake):
    server, client = fake(lambda msg, conn: [chunk_reply(msg)], reconnect_s=0.05,
                          reconnect_max_s=0.4)
    server.stop()  # nothing listens any more
    assert wait_until(lambda: client.health() is PlannerHealth.DEAD, 2.0)
    before = client.metrics().get("reconnect_failed", 0)
    wait_until(lambda: False, 1.2)
    tries = client.metrics().get("reconnect_failed", 0) - before
    # pauses 0.05, 0.1, 0.2, 0.4, 0.4 ... (+-20 %): 3-6 tries in 1.2 s, not 24
    assert 2 <= tries <= 7, tries


def test_request_refuses_a_non_finite_time(fake):
    _server, client = fake(lambda msg, conn: [])
    with pytest.raises(ValueError, match="finite"):
        client.request(obs(0.0), "", now=float("inf"))
