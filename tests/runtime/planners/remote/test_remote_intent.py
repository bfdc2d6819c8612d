"""The planner intent over real TCP loopback: a version 2 server and its clients carry it; an
old client (version 1 requests) and an old server (no ``versions`` in its health reply) still
work, without it."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.runtime.planners.protocol.framing import encode_frame
from edgerl.runtime.planners.remote.direct import DirectPlanner
from edgerl.runtime.planners.remote.planner import RemotePlanner
from tests.helpers.planners import (
    INTENT_DIM,
    OBS_DIM,
    FakeServer,
    IntentAffinePlanner,
    ServedPlanners,
    batch_msg,
    chunk_reply,
    expected_intent,
    expected_rows,
    plan_msg,
    raw_connect,
    raw_reply,
    wait_until,
)


@pytest.fixture
def served():
    planners = ServedPlanners()
    yield planners
    planners.stop_all()


def test_remote_planner_gets_the_intent_with_each_chunk(served):
    server = served(IntentAffinePlanner())
    client = RemotePlanner(host=server.address[0], port=server.address[1],
                           connect_timeout_s=3.0).start()
    served.connections.append(client)
    assert client.version == 2 and client.info.intent_dim == INTENT_DIM
    obs = np.array([0.5, -1.0, 2.0], np.float32)
    chunk = client.plan(obs, "", now=7.5)
    np.testing.assert_array_equal(chunk.actions, expected_rows(obs, ""))
    np.testing.assert_array_equal(chunk.intent, expected_intent(obs))
    assert client.latest().intent is not None
    batch = np.random.default_rng(0).normal(size=(3, OBS_DIM)).astype(np.float32)
    chunks, intent = client.plan_batch(batch, ["", "", ""], now=1.0, with_intent=True)
    np.testing.assert_array_equal(intent, np.stack([expected_intent(o) for o in batch]))
    assert chunks.shape[0] == 3


def test_an_old_client_speaking_version_1_still_works(served):
    server = served(IntentAffinePlanner())
    sock = raw_connect(server.address)
    served.connections.append(sock)
    obs = np.array([0.1, 0.2, 0.3], np.float32)
    for req_id, msg in ((1, plan_msg(1, obs, v=1)), (2, batch_msg(2, obs[None], [""], v=1))):
        sock.sendall(encode_frame(msg))
        reply = raw_reply(sock)
        assert reply["id"] == req_id and reply["v"] == 1 and "intent" not in reply
    sock.sendall(encode_frame(plan_msg(3, obs, v=2)))  # a new client asks in v2: it gets it
    reply = raw_reply(sock)
    assert reply["v"] == 2 and "intent" in reply


def test_a_new_client_talks_version_1_to_an_old_server():
    """An old server's health reply lists no versions and it refuses v2 requests: the client
    sends v1 and gets chunks without an intent."""
    server = FakeServer(lambda msg, _: [{"v": 1, **chunk_reply(msg)}])
    try:
        with RemotePlanner(host=server.address[0], port=server.address[1]) as client:
            assert client.version == 1 and client.info.intent_dim == 0
            chunk = client.plan(np.zeros(3, np.float32), "", now=2.0)
            assert chunk.intent is None
        assert server.plans and all(p["v"] == 1 for p in server.plans)
    finally:
        server.stop()


def test_remote_planner_rejects_an_intent_of_the_wrong_size():
    def respond(msg, _):
        return [{**chunk_reply(msg), "v": 2, "intent": {
            "dtype": "float32", "shape": [3], "data": np.zeros(3, np.float32).tobytes()}}]

    server = FakeServer(respond)  # announces intent_dim 0 (INFO)
    try:
        with RemotePlanner(host=server.address[0], port=server.address[1]) as client:
            client.request(np.zeros(3, np.float32), "", now=2.0)
            assert wait_until(lambda: client.metrics().get("rejected_shape", 0) == 1, 3.0)
            assert client.latest() is None
    finally:
        server.stop()


def test_direct_planner_keeps_the_intents_of_each_piece(served):
    server = served(IntentAffinePlanner())
    with DirectPlanner(*server.address) as client:
        assert client.version == 2 and client.info.intent_dim == INTENT_DIM
        pieces = [np.random.default_rng(k).normal(size=(4, OBS_DIM)).astype(np.float32)
                  for k in range(2)]
        ticket = client.send_many(pieces)
        out = client.receive(ticket)
        for obs, chunks, intent in zip(pieces, out, ticket.intents):
            np.testing.assert_array_equal(chunks, np.stack([expected_rows(r, "") for r in obs]))
            np.testing.assert_array_equal(intent, np.stack([expected_intent(r) for r in obs]))
