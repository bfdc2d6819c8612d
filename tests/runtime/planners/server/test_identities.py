"""Client identities of the planner server: named keys, each with the most urgent priority
its requests may claim; the key id named in the client's hello, the shared secret for a
client that names none. Real server and clients on 127.0.0.1 only."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgerl.runtime.planners.protocol.auth import FrameAuth, client_hello
from edgerl.runtime.planners.protocol.framing import decode_payload, encode_frame, recv_frame
from edgerl.runtime.planners.remote.config import RemotePlannerError
from edgerl.runtime.planners.remote.direct import DirectPlanner
from edgerl.runtime.planners.remote.planner import RemotePlanner
from edgerl.runtime.planners.server.config import (
    ClientKey,
    ServerConfig,
    load_client_keys,
    parse_client_key,
)
from tests.helpers.planners import (
    OBS_DIM,
    AffinePlanner,
    BatchAffinePlanner,
    ServedPlanners,
    batch_msg,
    closed_by_peer,
    expected_rows,
    plan_msg,
    raw_connect,
    raw_reply,
)

SHARED = b"0123456789abcdef-shared-secret"
ROBOT = b"robot-1-secret-0123456789abcdef"
TRAINER = b"trainer-secret-0123456789abcdef"
KEYS = {"robot-1": ClientKey(ROBOT, "robot"), "trainer": ClientKey(TRAINER, "training")}
OBS = np.array([1.0, 2.0, 3.0], np.float32)


@pytest.fixture
def serve():
    """``serve(planner, **config)`` -> started server; everything stops at teardown."""
    served = ServedPlanners()
    yield served
    for server in served.stop_all():
        assert not any(server.metrics()["threads_alive"].values())


def remote(server, **cfg) -> RemotePlanner:
    host, port = server.address
    return RemotePlanner(host=host, port=port, connect_timeout_s=2.0, **cfg)


def keyed_socket(serve, server, key_id: str, secret: bytes) -> tuple[object, FrameAuth, dict]:
    """A raw connection that has named ``key_id`` in its hello: (socket, auth, welcome)."""
    sock = raw_connect(server.address)
    serve.connections.append(sock)
    auth = FrameAuth(secret, raw_reply(sock)["nonce"], side="client")
    sock.sendall(auth.seal(client_hello(key_id)))
    welcome = decode_payload(auth.open(recv_frame(sock)))
    return sock, auth, welcome


def tagged_reply(sock, auth: FrameAuth) -> dict:
    return decode_payload(auth.open(recv_frame(sock)))


class TestPriorityPerIdentity:
    def test_a_training_key_claiming_robot_is_refused_and_served_at_training(self, serve):
        server = serve(AffinePlanner(), secret=SHARED, client_keys=KEYS)
        with remote(server, secret=TRAINER, key_id="trainer", priority="robot") as client, \
                pytest.raises(RemotePlannerError) as refused:
            client.plan(OBS, "go", now=1.0)
        assert refused.value.code == "priority_denied"
        assert "'trainer'" in str(refused.value) and "'training' at most" in str(refused.value)
        with remote(server, secret=TRAINER, key_id="trainer", priority="training") as client:
            np.testing.assert_array_equal(client.plan(OBS, "go", now=2.0).actions,
                                          expected_rows(OBS, "go"))
        m = server.metrics()
        assert m["dropped"]["priority_denied"] == 1 and m["served"] == 1
        assert m["bad_frames"] == 0  # a policy refusal, not a hostile frame

    def test_the_refusal_leaves_the_connection_open_and_no_priority_means_the_keys(
            self, serve):
        server = serve(BatchAffinePlanner(), secret=SHARED, client_keys=KEYS)
        sock, auth, welcome = keyed_socket(serve, server, "trainer", TRAINER)
        assert welcome == {"v": 1, "type": "welcome", "key_id": "trainer",
                           "max_priority": "training"}
        sock.sendall(auth.seal(plan_msg(1, OBS, priority="robot")))
        reply = tagged_reply(sock, auth)
        assert reply["code"] == "priority_denied" and reply["id"] == 1
        sock.sendall(auth.seal(batch_msg(2, np.zeros((2, OBS_DIM)), ["a", "b"],
                                         priority="robot")))
        assert tagged_reply(sock, auth)["code"] == "priority_denied"
        sock.sendall(auth.seal(plan_msg(3, OBS, priority="training")))
        assert tagged_reply(sock, auth)["type"] == "chunk"
        sock.sendall(auth.seal(plan_msg(4, OBS)))  # no priority: the key's, not `robot`
        assert tagged_reply(sock, auth)["type"] == "chunk"
        sock.sendall(auth.seal(batch_msg(5, np.zeros((2, OBS_DIM)), ["a", "b"])))
        assert tagged_reply(sock, auth)["type"] == "chunk_batch"
        m = server.metrics()
        assert m["dropped"]["priority_denied"] == 2 and m["served"] == 3

    def test_a_robot_key_is_served_at_robot(self, serve):
        server = serve(AffinePlanner(), client_keys=KEYS)
        with remote(server, secret=ROBOT, key_id="robot-1", priority="robot") as client:
            np.testing.assert_array_equal(client.plan(OBS, "go", now=1.0).actions,
                                          expected_rows(OBS, "go"))
        sock, auth, welcome = keyed_socket(serve, server, "robot-1", ROBOT)
        assert welcome["max_priority"] == "robot"
        sock.sendall(auth.seal(plan_msg(7, OBS, priority="robot")))
        assert tagged_reply(sock, auth)["type"] == "chunk"
        m = server.metrics()
        assert m["served"] == 2 and "priority_denied" not in m["dropped"]

    def test_direct_planner_names_its_key_too(self, serve):
        server = serve(BatchAffinePlanner(), client_keys=KEYS)
        host, port = server.address
        piece = [np.zeros((2, OBS_DIM), np.float32)]
        with DirectPlanner(host, port, secret=TRAINER, key_id="trainer", timeout_s=2.0) as c:
            assert c.plan_many(piece)[0].shape == (2, 4, 2)
        with DirectPlanner(host, port, secret=TRAINER, key_id="trainer", priority="robot",
                           timeout_s=2.0) as c, pytest.raises(RemotePlannerError) as refused:
            c.plan_many(piece)
        assert refused.value.code == "priority_denied"


class TestKeyIds:
    def test_an_unknown_key_id_is_refused_by_name_and_counted(self, serve):
        server = serve(AffinePlanner(), secret=SHARED, client_keys=KEYS)
        with pytest.raises(RemotePlannerError) as refused:
            remote(server, secret=TRAINER, key_id="intruder").start()
        assert refused.value.code == "unknown_key" and "'intruder'" in str(refused.value)
        host, port = server.address
        with pytest.raises(RemotePlannerError, match="unknown_key.*'nobody'"):
            DirectPlanner(host, port, secret=TRAINER, key_id="nobody", timeout_s=2.0).connect()
        # raw: the refusal is untagged (the server has no secret for that name), then closed
        sock = raw_connect(server.address)
        serve.connections.append(sock)
        auth = FrameAuth(TRAINER, raw_reply(sock)["nonce"], side="client")
        sock.sendall(auth.seal(client_hello("ghost")))
        assert raw_reply(sock)["code"] == "unknown_key"
        assert closed_by_peer(sock, 2.0)
        m = server.metrics()
        assert m["dropped"]["unknown_key"] == 3 and m["served"] == 0

    def test_a_known_key_id_with_the_wrong_secret_is_unauthorized(self, serve):
        server = serve(AffinePlanner(), client_keys=KEYS)
        with pytest.raises(RemotePlannerError) as refused:
            remote(server, secret=TRAINER, key_id="robot-1").start()  # the trainer's secret
        assert refused.value.code == "unauthorized"
        assert server.metrics()["bad_frames"] == 1 and server.metrics()["served"] == 0

    def test_named_keys_only_refuse_a_client_that_names_none(self, serve):
        server = serve(AffinePlanner(), client_keys=KEYS)
        with pytest.raises(RemotePlannerError, match="unauthorized.*named keys only"):
            remote(server, secret=ROBOT).start()
        sock = raw_connect(server.address)
        serve.connections.append(sock)
        raw_reply(sock)  # the server's hello
        sock.sendall(encode_frame(plan_msg(1, OBS)))  # untagged
        assert raw_reply(sock)["code"] == "unauthorized"
        assert closed_by_peer(sock, 2.0)


class TestSharedSecret:
    @pytest.mark.parametrize("keys", [{}, KEYS], ids=["secret-only", "beside-named-keys"])
    def test_the_shared_secret_still_claims_any_priority(self, serve, keys):
        server = serve(BatchAffinePlanner(), secret=SHARED, client_keys=keys)
        for n, priority in enumerate(("robot", "training")):
            with remote(server, secret=SHARED, priority=priority) as client:
                np.testing.assert_array_equal(client.plan(OBS, "go", now=1.0 + n).actions,
                                              expected_rows(OBS, "go"))
        host, port = server.address
        with DirectPlanner(host, port, secret=SHARED, priority="robot", timeout_s=2.0) as c:
            assert c.plan_many([np.zeros((2, OBS_DIM), np.float32)])[0].shape == (2, 4, 2)
        m = server.metrics()
        assert m["served"] == 3 and "priority_denied" not in m["dropped"]


class TestKeyConfig:
    def test_the_key_file_and_the_flag_read_secrets_and_priorities(self, tmp_path):
        (tmp_path / "robot.key").write_bytes(ROBOT + b"\n")
        (tmp_path / "trainer.key").write_bytes(TRAINER)
        table = {"robot-1": {"secret_file": "robot.key", "max_priority": "robot"},
                 "trainer": {"secret_file": str(tmp_path / "trainer.key"),
                             "max_priority": "training"}}
        (tmp_path / "keys.json").write_text(json.dumps(table))
        assert load_client_keys(str(tmp_path / "keys.json")) == KEYS
        assert ROBOT.decode() not in repr(KEYS)  # secrets stay out of logs and tracebacks
        assert parse_client_key(f"trainer:training:{tmp_path / 'trainer.key'}") == (
            "trainer", KEYS["trainer"])
        table["trainer"]["max_priority"] = "urgent"
        (tmp_path / "keys.json").write_text(json.dumps(table))
        with pytest.raises(ValueError, match="'trainer'.*max_priority must be one of"):
            load_client_keys(str(tmp_path / "keys.json"))
        with pytest.raises(ValueError, match="NAME:PRIORITY:SECRET_FILE"):
            parse_client_key("trainer:training")
        with pytest.raises(ValueError, match="key id"):
            parse_client_key(f"bad name:robot:{tmp_path / 'robot.key'}")

    def test_no_two_identities_share_a_secret_and_keys_allow_binding_beyond_loopback(self):
        ServerConfig(host="0.0.0.0", client_keys=KEYS).validate()
        with pytest.raises(ValueError, match="'trainer' has the same secret as the shared"):
            ServerConfig(secret=TRAINER, client_keys=KEYS).validate()
        with pytest.raises(ValueError, match="'b' has the same secret as client key 'a'"):
            ServerConfig(client_keys={"a": ClientKey(ROBOT, "robot"),
                                      "b": ClientKey(ROBOT, "training")}).validate()
        with pytest.raises(ValueError, match="at least 16 bytes"):
            ClientKey(b"short", "robot")
        with pytest.raises(ValueError, match="needs that key's secret"):
            RemotePlanner(key_id="trainer")
