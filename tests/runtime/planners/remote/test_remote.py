"""Planner serving over real TCP loopback: RemotePlanner against PlannerServer."""

from __future__ import annotations

import logging
import socket
import struct
import threading
import time

import numpy as np
import pytest

from edgerl.contract.planner import Planner, PlannerHealth
from edgerl.runtime.planners.protocol.framing import encode_frame, recv_frame
from edgerl.runtime.planners.remote.config import RemotePlannerError
from edgerl.runtime.planners.remote.planner import RemotePlanner
from edgerl.runtime.planners.server.server import PlannerServer, ServerConfig
from tests.helpers.planners import (
    OBS_DIM,
    A,
    AffinePlanner,
    BatchAffinePlanner,
    H,
    ServedPlanners,
    expected_rows,
    plan_msg,
    raw_connect,
    raw_reply,
)


@pytest.fixture
def serve():
    """``serve(planner, **config)`` -> a started server and a started client of it;
    everything is stopped at teardown."""
    served = ServedPlanners()

    def _serve(planner: AffinePlanner, **cfg) -> tuple[PlannerServer, RemotePlanner]:
        server = served(planner, **cfg)
        host, port = server.address
        client = RemotePlanner(host=host, port=port, connect_timeout_s=3.0).start()
        served.connections.append(client)
        return server, client

    yield _serve
    served.stop_all()


def client_of_a_stopped_server(reconnect_s: float) -> tuple[AffinePlanner, int, RemotePlanner]:
    """A started client whose server has stopped, once it reports ``DEAD`` (or 2 s passed);
    returns the planner, the port it was served on and the client (the caller closes it)."""
    planner = AffinePlanner()
    server = PlannerServer(planner, ServerConfig(port=0))
    host, port = server.start()
    try:
        client = RemotePlanner(host=host, port=port, reconnect_s=reconnect_s).start()
    finally:
        server.stop()
    t_end = time.monotonic() + 2.0
    while client.health() is not PlannerHealth.DEAD and time.monotonic() < t_end:
        time.sleep(0.01)
    return planner, port, client


class TestLoopback:
    def test_plan_returns_the_chunk_in_the_clients_clock(self, serve):
        server, client = serve(AffinePlanner())
        assert client.info.horizon == H and client.info.action_dim == A
        obs = np.array([0.5, -1.0, 2.0], np.float32)
        chunk = client.plan(obs, "push", now=123.25)
        np.testing.assert_array_equal(chunk.actions, expected_rows(obs, "push"))
        assert chunk.t0 == 123.25 and chunk.obs_time == 123.25 and chunk.source == "affine"
        assert client.latest() is not None
        # OK unless this one round trip was slow (a loaded machine): health follows the RTT
        limit = client.config.health.slow_factor * client.info.expected_latency_s + 0.005
        slow = float(np.median(np.asarray(client._rtts))) > limit
        assert client.health() is (PlannerHealth.SLOW if slow else PlannerHealth.OK)
        assert server.metrics()["served"] == 1

    def test_request_never_blocks_and_latest_keeps_previous_chunk(self, serve):
        planner = AffinePlanner(sleep_s=2.0, slow_from_call=1)  # first call fast, then 2 s
        server, client = serve(planner)
        first = client.plan(np.ones(OBS_DIM, np.float32), "", now=1.0)
        worst = 0.0
        for k in range(20):  # an edit loop at ~100 Hz asking for new chunks every tick
            t = time.perf_counter()
            client.request(np.full(OBS_DIM, 5.0 + k, np.float32), "", now=2.0 + k)
            latest = client.latest()
            worst = max(worst, time.perf_counter() - t)
            assert latest is not None and latest.obs_time == first.obs_time
            time.sleep(0.01)
        assert worst < 0.05, f"request()/latest() took {worst * 1e3:.1f} ms"
        assert np.array_equal(client.latest().actions, first.actions)
        # health still answers while the planner sleeps; newer requests superseded older ones
        reply = client.query_health(timeout_s=1.0)
        assert reply["metrics"]["superseded"] >= 1
        assert reply["info"]["horizon"] == H

    def test_newest_observation_wins(self, serve):
        planner = AffinePlanner(sleep_s=0.3, slow_from_call=0)
        server, client = serve(planner)
        for k in range(4):
            client.request(np.full(OBS_DIM, float(k), np.float32), "", now=float(k))
            time.sleep(0.02)
        t_end = time.monotonic() + 3.0
        while time.monotonic() < t_end:
            c = client.latest()
            if c is not None and c.obs_time == 3.0:
                break
            time.sleep(0.02)
        assert client.latest().obs_time == 3.0
        m = server.metrics()
        # typically 0 served, 1 & 2 replaced, 3 served; a loaded machine may replace 0 too
        assert m["served"] + m["superseded"] == 4 and m["superseded"] >= 2, m

    def test_late_answer_is_dropped_and_counted(self, serve):
        server, client = serve(AffinePlanner(sleep_s=0.3))
        client.config.deadline_s = 0.1
        with pytest.raises(RemotePlannerError, match="deadline_exceeded"):
            client.plan(np.zeros(OBS_DIM, np.float32), "", now=0.0)
        assert server.metrics()["late"] == 1 and server.metrics()["served"] == 0
        assert client.latest() is None

    def test_planner_exception_is_reported_and_serving_continues(self, serve):
        planner = AffinePlanner()
        server, client = serve(planner)
        planner.fail_next = True
        with pytest.raises(RemotePlannerError, match="planner_error: RuntimeError: model "
                                                     "exploded"):
            client.plan(np.zeros(OBS_DIM, np.float32), "", now=0.0)
        assert client.plan(np.zeros(OBS_DIM, np.float32), "", now=1.0).obs_time == 1.0
        assert server.metrics()["errors"] == 1

    def test_unreachable_server_is_a_clear_error(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with pytest.raises(RemotePlannerError, match=f"no planner server at 127.0.0.1:{port}"):
            RemotePlanner(port=port, connect_timeout_s=0.3).start()

    def test_reconnects_after_server_restart_reports_dead_meanwhile(self, serve):
        planner, port, client = client_of_a_stopped_server(reconnect_s=0.05)
        server = None
        try:
            assert client.health() is PlannerHealth.DEAD
            server = PlannerServer(planner, ServerConfig(port=port))
            server.start()
            t_end = time.monotonic() + 3.0
            while client.health() is PlannerHealth.DEAD and time.monotonic() < t_end:
                time.sleep(0.02)
            assert client.plan(np.zeros(OBS_DIM, np.float32), "", now=5.0).obs_time == 5.0
        finally:
            client.close()
            if server is not None:
                server.stop()


class TestBadInput:
    def test_bad_clients_get_errors_while_a_good_client_keeps_being_served(self, serve, caplog):
        caplog.set_level(logging.WARNING, logger="edgerl.runtime.planners.server")
        server, good = serve(AffinePlanner(), max_frame=4096)
        bad = raw_connect(server.address)
        try:
            # 1. unknown protocol version -> error reply, connection stays open
            bad.sendall(encode_frame({"v": 7, "type": "plan", "id": 1}))
            reply = raw_reply(bad)
            assert reply["code"] == "unsupported_version" and "7" in reply["message"]
            # 2. malformed payload (not msgpack) -> error reply
            junk = b"\xc1\xc1\xc1"
            bad.sendall(struct.pack(">I", len(junk)) + junk)
            assert raw_reply(bad)["code"] == "malformed"
            # 3. wrong observation size -> malformed naming the field
            bad.sendall(encode_frame(plan_msg(5, np.zeros(OBS_DIM + 2, np.float32))))
            reply = raw_reply(bad)
            assert reply["id"] == 5 and reply["code"] == "malformed" and "obs" in reply["message"]
            # 4. unknown message type
            bad.sendall(encode_frame({"v": 1, "type": "dance", "id": 6}))
            assert raw_reply(bad)["code"] == "unknown_type"
            # the same connection still works for a valid request
            bad.sendall(encode_frame(plan_msg(8, np.ones(OBS_DIM, np.float32))))
            assert raw_reply(bad)["type"] == "chunk"
            # the good client is unaffected
            assert good.plan(np.ones(OBS_DIM, np.float32), "a", now=2.0).obs_time == 2.0
            # 5. oversized frame -> error reply, then the server closes this connection
            bad.sendall(struct.pack(">I", 10_000_000))
            assert raw_reply(bad)["code"] == "frame_too_large"
            assert recv_frame(bad) is None  # closed by the server
        finally:
            bad.close()
        assert any("exceeds the limit" in r.getMessage() and "closing" in r.getMessage()
                   for r in caplog.records)
        assert any("unsupported_version" in r.getMessage() for r in caplog.records)
        assert good.plan(np.ones(OBS_DIM, np.float32), "", now=3.0).obs_time == 3.0
        assert server.metrics()["bad_frames"] == 5

    def test_too_many_clients_are_refused(self, serve):
        server, _good = serve(AffinePlanner(), max_clients=1)
        extra = raw_connect(server.address)
        try:
            assert raw_reply(extra)["code"] == "overloaded"
        finally:
            extra.close()
        assert server.metrics()["refused"] == 1


def test_remote_planner_satisfies_the_planner_protocol():
    assert isinstance(RemotePlanner(), Planner)


def test_blocking_plan_fails_fast_while_disconnected():
    _, _, client = client_of_a_stopped_server(reconnect_s=5.0)
    try:
        t = time.monotonic()
        with pytest.raises(RemotePlannerError, match="disconnected"):
            client.plan(np.zeros(OBS_DIM, np.float32), "", now=0.0)
        assert time.monotonic() - t < 0.5
        client.request(np.zeros(OBS_DIM, np.float32), "", now=0.0)  # still never raises
    finally:
        client.close()


class TestBatch:
    def test_plan_batch_round_trip(self, serve):
        _server, client = serve(BatchAffinePlanner())
        obs = np.arange(4 * OBS_DIM, dtype=np.float32).reshape(4, OBS_DIM)
        texts = ["a", "bb", "", "cccc"]
        chunks = client.plan_batch(obs, texts, now=3.0)
        assert chunks.shape == (4, H, A) and chunks.dtype == np.float32
        for i in range(4):
            np.testing.assert_array_equal(chunks[i], expected_rows(obs[i], texts[i]))

    def test_planner_without_batching_refuses_clearly(self, serve):
        _server, client = serve(AffinePlanner())
        with pytest.raises(RemotePlannerError, match="unknown_type: this planner does not "
                                                     "answer plan_batch"):
            client.plan_batch(np.zeros((2, OBS_DIM), np.float32), ["", ""], now=0.0)
        with pytest.raises(ValueError, match="n instructions"):
            client.plan_batch(np.zeros((2, OBS_DIM), np.float32), [""], now=0.0)


def test_client_refused_by_a_full_server_fails_fast_and_cleans_up(serve):
    server, _first = serve(AffinePlanner(), max_clients=1)
    host, port = server.address
    before = threading.active_count()
    t = time.monotonic()
    with pytest.raises(RemotePlannerError, match="overloaded: too many clients"):
        RemotePlanner(host=host, port=port, connect_timeout_s=5.0).start()
    assert time.monotonic() - t < 3.0
    time.sleep(0.1)
    assert threading.active_count() <= before
