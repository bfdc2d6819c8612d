"""The planner server under hostile or careless clients: slow and idle
connections, oversized work, malformed arrays, authentication, batching across clients,
deadline-aware admission, priorities and metrics. Real TCP on 127.0.0.1 only."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest

from edgerl.runtime.planners.protocol.framing import HEADER, encode_array, encode_frame, recv_frame
from edgerl.runtime.planners.remote.config import RemotePlannerError
from edgerl.runtime.planners.remote.planner import RemotePlanner
from edgerl.runtime.planners.server.server import PlannerServer, ServerConfig
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

SECRET = b"0123456789abcdef-shared-secret"


@pytest.fixture
def serve():
    """``serve(planner, **config)`` -> started server; everything stops at teardown."""
    served = ServedPlanners()
    yield served
    for server in served.stop_all():
        assert not any(server.metrics()["threads_alive"].values())


def timed_plan(sock: socket.socket, req_id: int, value: float = 1.0) -> tuple[dict, float]:
    t = time.monotonic()
    sock.sendall(encode_frame(plan_msg(req_id, np.full(OBS_DIM, value, np.float32))))
    return raw_reply(sock), time.monotonic() - t


class TestSlowAndIdleClients:
    def test_idle_and_slowloris_connections_do_not_lock_out_a_good_client(self, serve):
        server = serve(AffinePlanner(), read_timeout_s=0.5, idle_timeout_s=1.0)
        idle = [raw_connect(server.address) for _ in range(16)]
        slow = [raw_connect(server.address) for _ in range(16)]
        serve.connections.extend(idle + slow)
        frame = encode_frame(plan_msg(1, np.ones(OBS_DIM, np.float32)))
        for s in slow:  # the first two bytes of a valid frame, then one byte every 0.2 s
            s.sendall(frame[:2])
        good = raw_connect(server.address)
        serve.connections.append(good)
        worst = 0.0
        for k in range(10):
            reply, took = timed_plan(good, 100 + k, float(k))
            assert reply["type"] == "chunk" and reply["id"] == 100 + k
            worst = max(worst, took)
            for s in slow:
                s.sendall(frame[2 + k:3 + k])
            time.sleep(0.02)
        assert worst < 0.5, f"a good request took {worst * 1e3:.0f} ms beside 32 bad clients"
        for s in slow:  # cut 0.5 s after their first byte, with a named reply
            s.settimeout(2.0)
            assert raw_reply(s)["code"] == "read_timeout"
            assert closed_by_peer(s, 1.0)
        for s in idle:
            s.settimeout(2.0)
            assert raw_reply(s)["code"] == "idle_timeout"
            assert closed_by_peer(s, 1.0)
        m = server.metrics()
        assert m["dropped"]["read_timeout"] == 16 and m["dropped"]["idle_timeout"] == 16
        assert m["clients"] <= 1  # the good one (until its own idle timeout)

    def test_idle_connections_at_capacity_are_evicted_by_the_idle_timeout(self, serve):
        server = serve(AffinePlanner(), max_clients=4, idle_timeout_s=0.4)
        idle = [raw_connect(server.address) for _ in range(4)]
        serve.connections.extend(idle)
        time.sleep(0.1)
        refused = raw_connect(server.address)
        serve.connections.append(refused)
        assert raw_reply(refused)["code"] == "overloaded"
        time.sleep(0.6)
        late = raw_connect(server.address)
        serve.connections.append(late)
        reply, _ = timed_plan(late, 1)
        assert reply["type"] == "chunk"


class TestWorkQuotas:
    def test_a_huge_plan_batch_is_refused_at_once_and_does_not_stall_others(self, serve):
        planner = BatchAffinePlanner(row_s=0.001)  # 4,096 rows would take 4 s
        server = serve(planner)
        hog, good = raw_connect(server.address), raw_connect(server.address)
        serve.connections.extend([hog, good])
        texts = [f"instruction number {i}" for i in range(4096)]
        t = time.monotonic()
        hog.sendall(encode_frame(batch_msg(1, np.zeros((4096, OBS_DIM)), texts)))
        reply = raw_reply(hog)
        assert time.monotonic() - t < 1.0
        assert reply["code"] == "quota_exceeded" and "max_batch_rows" in reply["message"]
        answer, took = timed_plan(good, 2)
        assert answer["type"] == "chunk" and took < 0.5
        assert planner.rows == 1  # only the good request reached the planner

    def test_rate_quota_per_client(self, serve):
        server = serve(BatchAffinePlanner(), rows_per_s=50, max_batch_rows=8,
                       max_pending_batches=8)
        sock = raw_connect(server.address)
        serve.connections.append(sock)
        obs = np.zeros((8, OBS_DIM))
        for i in range(5):  # burst: 4 x max_batch_rows = 32 rows, refilled at 50 rows/s
            sock.sendall(encode_frame(batch_msg(i, obs, [""] * 8)))
        replies = {r["id"]: r for r in (raw_reply(sock) for _ in range(5))}
        assert [replies[i]["type"] for i in range(4)] == ["chunk_batch"] * 4
        assert replies[4]["code"] == "quota_exceeded" and "50 rows/s" in replies[4]["message"]

    def test_too_many_refused_messages_close_the_connection(self, serve):
        server = serve(AffinePlanner(), max_bad_frames=3)
        sock = raw_connect(server.address)
        serve.connections.append(sock)
        for i in range(3):
            sock.sendall(encode_frame({"v": 1, "type": "dance", "id": i}))
            assert raw_reply(sock)["code"] == "unknown_type"
        assert raw_reply(sock)["code"] == "quota_exceeded"
        assert closed_by_peer(sock, 2.0)


BAD_ARRAYS = {
    "dtype_as_list": {"dtype": ["float32"], "shape": [3], "data": b"\0" * 12},
    "dtype_as_map": {"dtype": {"a": 1}, "shape": [3], "data": b"\0" * 12},
    "shape_of_bools": {"dtype": "float32", "shape": [True], "data": b"\0" * 4},
    "shape_overflowing_int64": {"dtype": "float32", "shape": [2 ** 32, 2 ** 32], "data": b""},
    "shape_beyond_uint64": {"dtype": "float32", "shape": [2 ** 64 - 1], "data": b""},
}


@pytest.mark.parametrize("name", sorted(BAD_ARRAYS))
def test_malformed_arrays_get_a_named_reply_and_the_connection_lives(serve, name):
    server = serve(AffinePlanner())
    sock = raw_connect(server.address)
    serve.connections.append(sock)
    msg = plan_msg(7, np.zeros(OBS_DIM, np.float32))
    msg["obs"] = BAD_ARRAYS[name]
    sock.sendall(encode_frame(msg))
    reply = raw_reply(sock)
    assert reply["type"] == "error" and reply["code"] == "malformed" and reply["id"] == 7
    assert reply["message"].startswith("obs.")
    reply, _ = timed_plan(sock, 8)  # same connection, still served
    assert reply["type"] == "chunk"
    assert server.metrics()["internal"] == 0


class TestAuthentication:
    def test_binding_beyond_loopback_requires_a_secret(self):
        with pytest.raises(ValueError, match="beyond loopback.*requires a shared secret"):
            ServerConfig(host="0.0.0.0").validate()
        with pytest.raises(ValueError, match="requires a shared secret"):
            PlannerServer(AffinePlanner(), ServerConfig(host="0.0.0.0"))  # refused unbound
        ServerConfig(host="0.0.0.0", secret=SECRET).validate()
        with pytest.raises(ValueError, match="at least 16 bytes"):
            ServerConfig(secret=b"short").validate()

    def test_unauthenticated_sockets_cannot_lock_authenticated_clients_out(self, serve):
        """150 connections that never authenticate held every slot for the idle timeout
        (60 s): now they count against their own caps (8 per address here), are cut after the
        authentication timeout, and an authenticated client, connected or new, is served."""
        server = serve(AffinePlanner(), secret=SECRET, max_clients=4, auth_timeout_s=3.0)
        host, port = server.address
        obs = np.array([1.0, 2.0, 3.0], np.float32)
        with RemotePlanner(host=host, port=port, secret=SECRET) as client:
            flood = [raw_connect(server.address) for _ in range(150)]
            serve.connections.extend(flood)
            first = [raw_reply(s) for s in flood]
            admitted = [s for s, r in zip(flood, first, strict=True) if "nonce" in r]
            refused = [r for r in first if r.get("code") == "overloaded"]
            assert len(admitted) == 8 and len(refused) == 142, first[:2]
            assert "still authenticating from 127.0.0.1" in refused[0]["message"]
            np.testing.assert_array_equal(client.plan(obs, "go", now=4.0).actions,
                                          expected_rows(obs, "go"))
            for s in admitted:  # cut after the authentication timeout, with a named reply
                s.settimeout(6.0)
                assert raw_reply(s)["code"] == "auth_timeout"
                assert closed_by_peer(s, 1.0)
            with RemotePlanner(host=host, port=port, secret=SECRET) as second:
                np.testing.assert_array_equal(second.plan(obs, "go", now=5.0).actions,
                                              expected_rows(obs, "go"))
        m = server.metrics()
        assert m["dropped"]["auth_timeout"] == 8 and m["refused"] >= 142

    def test_tagged_frames_round_trip_and_everything_else_is_refused(self, serve):
        from edgerl.runtime.planners.protocol.auth import FrameAuth

        server = serve(AffinePlanner(), secret=SECRET)
        host, port = server.address
        with RemotePlanner(host=host, port=port, secret=SECRET) as client:
            obs = np.array([1.0, 2.0, 3.0], np.float32)
            np.testing.assert_array_equal(client.plan(obs, "go", now=4.0).actions,
                                          expected_rows(obs, "go"))
        for secret, why in ((b"wrong-secret-of-enough-bytes", "refused our frames"),
                            (None, "requires a shared secret")):
            with pytest.raises(RemotePlannerError, match=f"unauthorized.*{why}"):
                RemotePlanner(host=host, port=port, secret=secret,
                              connect_timeout_s=2.0).start()
        # a raw client: untagged frame -> untagged `unauthorized`, then closed
        sock = raw_connect(server.address)
        serve.connections.append(sock)
        hello = raw_reply(sock)
        assert hello["type"] == "hello" and hello["auth"] == "hmac-sha256"
        sock.sendall(encode_frame(plan_msg(1, np.ones(OBS_DIM))))
        assert raw_reply(sock)["code"] == "unauthorized"
        assert closed_by_peer(sock, 2.0)
        # a replayed (correctly tagged) frame is refused
        sock = raw_connect(server.address)
        serve.connections.append(sock)
        auth = FrameAuth(SECRET, raw_reply(sock)["nonce"], side="client")
        frame = auth.seal(plan_msg(2, np.ones(OBS_DIM)))
        sock.sendall(frame)
        body = recv_frame(sock, max_frame=1 << 16)
        assert auth.open(body) and b"chunk" in body
        sock.sendall(frame)
        reply = raw_reply(sock)
        assert reply["code"] == "unauthorized" and "replayed" in reply["message"]
        # wrong secret, client without a secret, raw untagged frame, replay
        assert server.metrics()["bad_frames"] == 4


class TestBatchingAndAdmission:
    def test_requests_from_many_clients_share_planner_calls(self, serve):
        planner = BatchAffinePlanner(sleep_s=0.2)
        server = serve(planner, batch_window_s=0.01)
        socks = [raw_connect(server.address) for _ in range(8)]
        serve.connections.extend(socks)
        socks[0].sendall(encode_frame(plan_msg(0, np.zeros(OBS_DIM))))  # keeps it busy
        time.sleep(0.05)
        for i, s in enumerate(socks[1:], 1):
            s.sendall(encode_frame(plan_msg(i, np.full(OBS_DIM, float(i)), instruction="ab")))
        for i, s in enumerate(socks):
            reply = raw_reply(s)
            assert reply["type"] == "chunk" and reply["id"] == i
            rows = np.frombuffer(reply["actions"]["data"], "<f4").reshape(4, 2)
            np.testing.assert_array_equal(rows, expected_rows(np.full(OBS_DIM, float(i)),
                                                              "ab" if i else ""))
        assert [len(b) for b in planner.batches] == [1, 7]
        m = server.metrics()
        assert m["batches"] == 2 and m["batch_rows_max"] == 7 and m["served"] == 8

    def test_work_that_cannot_meet_its_deadline_is_refused_at_once(self, serve):
        planner = AffinePlanner(sleep_s=0.15)
        server = serve(planner)
        busy, urgent = raw_connect(server.address), raw_connect(server.address)
        serve.connections.extend([busy, urgent])
        assert timed_plan(busy, 1)[0]["type"] == "chunk"  # the cost model learns ~150 ms
        busy.sendall(encode_frame(plan_msg(2, np.zeros(OBS_DIM))))
        time.sleep(0.02)
        t = time.monotonic()
        urgent.sendall(encode_frame(plan_msg(3, np.zeros(OBS_DIM), deadline_s=0.1)))
        reply = raw_reply(urgent)
        assert time.monotonic() - t < 0.1, "refused only after waiting"
        assert reply["code"] == "deadline_unmeetable" and "estimated" in reply["message"]
        assert raw_reply(busy)["type"] == "chunk"
        m = server.metrics()
        assert m["dropped"]["deadline_unmeetable"] == 1 and planner.rows == 2

    def test_without_admission_the_same_request_runs_and_is_late(self, serve):
        planner = AffinePlanner(sleep_s=0.15)
        server = serve(planner, admission=False)
        busy, urgent = raw_connect(server.address), raw_connect(server.address)
        serve.connections.extend([busy, urgent])
        assert timed_plan(busy, 1)[0]["type"] == "chunk"
        busy.sendall(encode_frame(plan_msg(2, np.zeros(OBS_DIM))))
        time.sleep(0.02)
        urgent.sendall(encode_frame(plan_msg(3, np.zeros(OBS_DIM), deadline_s=0.1)))
        assert raw_reply(urgent)["code"] == "deadline_exceeded"
        assert planner.rows == 3 and server.metrics()["dropped"]["late"] == 1

    def test_robot_requests_go_before_queued_training_batches(self, serve):
        planner = BatchAffinePlanner(sleep_s=0.1)
        server = serve(planner, max_batch_rows=4)
        trainer, robot = raw_connect(server.address), raw_connect(server.address)
        serve.connections.extend([trainer, robot])
        trainer.sendall(encode_frame(batch_msg(1, np.zeros((4, OBS_DIM)), ["warm"] * 4)))
        time.sleep(0.03)  # the planner is busy with batch 1
        trainer.sendall(encode_frame(batch_msg(2, np.zeros((4, OBS_DIM)), ["train"] * 4)))
        time.sleep(0.01)
        robot.sendall(encode_frame(plan_msg(3, np.zeros(OBS_DIM), instruction="robot")))
        assert raw_reply(robot)["type"] == "chunk"
        assert raw_reply(trainer)["id"] == 1 and raw_reply(trainer)["id"] == 2
        assert [b[0] for b in planner.batches] == ["warm", "robot", "train"]


def test_metrics_report_queue_batches_drops_and_percentiles(serve):
    server = serve(BatchAffinePlanner())
    sock = raw_connect(server.address)
    serve.connections.append(sock)
    for i in range(20):
        timed_plan(sock, i)
    sock.sendall(encode_frame({"v": 1, "type": "plan", "id": 99, "obs": encode_array(
        np.zeros(OBS_DIM + 1, np.float32)), "obs_time": 0.0}))
    assert raw_reply(sock)["code"] == "malformed"
    m = server.metrics()
    assert m["served"] == 20 and m["admitted"] == 20 and m["queue_depth"] == 0
    assert m["batches"] == 20 and m["batch_rows_p50"] == 1.0
    assert 0 < m["response_p50_ms"] <= m["response_p99_ms"] < 1000
    assert m["bad_frames"] == 1 and m["internal"] == 0
    assert m["threads_alive"] == {"loop": True, "worker": True}


def test_no_thread_is_left_after_stop():
    before = {t.ident for t in threading.enumerate()}
    server = PlannerServer(AffinePlanner(), ServerConfig(port=0))
    server.start()
    sock = raw_connect(server.address)
    sock.sendall(HEADER.pack(10))  # a frame that never completes
    server.stop()
    sock.close()
    left = [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert left == []
