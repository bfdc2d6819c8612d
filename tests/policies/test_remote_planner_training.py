"""Training against a planner service: ``--planner remote:HOST:PORT`` parsing,
the batched callable over a real PlannerServer (127.0.0.1) serving a real BC network, and
``serve-planner`` refusing to bind beyond loopback without a secret."""

from __future__ import annotations

import ctypes
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from edgerl.apps.cli import main
from edgerl.contract.config_groups import build
from edgerl.contract.serde import SchemaError
from edgerl.policies.bc_planner import BCChunkPlanner
from edgerl.policies.config import TrainConfig
from edgerl.policies.remote_planner import (
    BCServedPlanner,
    ServedPlanFn,
    is_remote_planner,
    parse_remote_planner,
)
from edgerl.runtime.planners.server.server import PlannerServer, ServerConfig

OBS, ACT, H = 4, 1, 5


@pytest.fixture
def served():
    """A real (untrained) BC network behind a PlannerServer on 127.0.0.1."""
    torch.manual_seed(0)
    net = BCChunkPlanner(OBS, ACT, H, [-2.0], [2.0], hidden_dims=(16,))
    server = PlannerServer(BCServedPlanner(net, dt_s=0.02, period_s=0.02),
                           build(ServerConfig, port=0, obs_dim=OBS, max_batch_rows=64,
                                 max_pending_batches=2))
    host, port = server.start()
    yield net, f"remote:{host}:{port}", server
    server.stop()


def test_remote_spec_parsing():
    assert parse_remote_planner("remote:127.0.0.1:7700") == ("127.0.0.1", 7700)
    assert is_remote_planner("remote:x:1") and not is_remote_planner("bc")
    for bad in ("remote:7700", "remote:host:", "remote:host:99999", "remote::80"):
        with pytest.raises(ValueError, match="remote:HOST:PORT"):
            parse_remote_planner(bad)
    cfg = TrainConfig(task="cartpole", method="edit", planner="remote:127.0.0.1:7700")
    assert cfg.planner == "remote:127.0.0.1:7700"
    with pytest.raises(SchemaError, match="or remote:HOST:PORT"):
        TrainConfig(task="cartpole", method="edit", planner="remotely")


def test_served_chunks_equal_the_in_process_network(served):
    net, spec, server = served
    plan = ServedPlanFn.connect(spec, horizon=H, max_rows=64)
    try:
        obs = torch.randn(300, OBS)  # 5 requests of <= 64 rows
        got = plan(obs, torch.arange(300))
        assert got.shape == (300, H, ACT) and got.dtype == torch.float32
        torch.testing.assert_close(got, net.plan(obs), rtol=0, atol=1e-6)
        m = server.metrics()
        assert m["batch_rows_max"] <= 64 and m["served"] >= 5
    finally:
        plan.close()


def test_submit_sends_at_once_and_reads_the_answers_later(served):
    """``submit`` (what the wrapper's scheduler calls) sends on the caller's thread (no
    worker thread) and returns at once: several queries in flight, computed while nothing
    reads them; ``done()`` never waits; each future's chunks equal the network's."""
    net, spec, server = served
    before = threading.active_count()
    plan = ServedPlanFn.connect(spec, horizon=H, max_rows=64)
    try:
        batches = [torch.randn(40, OBS) for _ in range(4)]
        futures = [plan.submit(obs, torch.arange(40)) for obs in batches]
        assert threading.active_count() == before
        end = time.monotonic() + 10.0
        while not futures[-1].done():  # answered while the caller does something else
            assert time.monotonic() < end, "the service never answered"
            time.sleep(0.005)
        assert all(f.done() for f in futures)  # earlier answers filed on the way
        wait = plan.wait_s
        for obs, fut in reversed(list(zip(batches, futures))):
            torch.testing.assert_close(fut.result(), net.plan(obs), rtol=0, atol=1e-6)
        assert plan.wait_s - wait < 0.05  # the answers were in: result() read, not waited
        assert plan.calls == 4 and plan.rows == 160 and server.metrics()["served"] >= 4
    finally:
        plan.close()


def test_horizon_mismatch_is_a_clear_error(served):
    _net, spec, _server = served
    with pytest.raises(ValueError, match=f"chunks of {H} rows, this training run needs 8"):
        ServedPlanFn.connect(spec, horizon=8)


def test_bc_served_planner_plan_matches_plan_batch():
    torch.manual_seed(1)
    net = BCChunkPlanner(OBS, ACT, H, [-1.0], [1.0], hidden_dims=(8,))
    p = BCServedPlanner(net, dt_s=0.02, period_s=0.04)
    obs = np.random.default_rng(0).normal(size=(3, OBS)).astype(np.float32)
    batch = p.plan_batch(obs, ["", "", ""], 0.0)
    chunk = p.plan(obs[1], "", now=7.0)
    np.testing.assert_allclose(chunk.actions, batch[1], atol=1e-6)  # batch-size rounding
    assert chunk.t0 == 7.0 and p.info.horizon == H and p.info.period_s == 0.04


def _in_fresh_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_bc_served_planner_sets_torch_threads_in_every_calling_thread():
    """torch's thread count is per OS thread (OpenMP): the server thread that calls the
    planner would otherwise run it with one OpenMP thread per core, whatever the main thread
    set. Read from the OpenMP runtime torch really uses."""
    torch.tanh(torch.zeros(1))  # OpenMP loaded
    torch_dir = str(Path(torch.__file__).parent)
    with open("/proc/self/maps") as maps:  # torch's own runtime, not another package's copy
        libs = sorted({line.split()[-1] for line in maps
                       if "libgomp" in line and line.split()[-1].startswith(torch_dir)})
    if not libs:
        pytest.skip("this torch build does not bundle libgomp")
    omp_threads = ctypes.CDLL(libs[0]).omp_get_max_threads
    default = _in_fresh_thread(omp_threads)
    want = 1 if default != 1 else 2
    torch.manual_seed(2)
    p = BCServedPlanner(BCChunkPlanner(OBS, ACT, H, [-1.0], [1.0], hidden_dims=(8,)),
                        dt_s=0.02, period_s=0.02, threads=want)
    obs = np.zeros((2, OBS), np.float32)

    def plan_then_read():
        p.plan_batch(obs, ["", ""], 0.0)
        return omp_threads()

    assert _in_fresh_thread(plan_then_read) == want != default
    with pytest.raises(ValueError, match="threads must be >= 1"):
        BCServedPlanner(p.net, dt_s=0.02, period_s=0.02, threads=0)


def test_serve_planner_refuses_all_interfaces_without_a_secret(capsys, monkeypatch):
    monkeypatch.delenv("EDGERL_PLANNER_SECRET", raising=False)
    code = main(["serve-planner", "--planner",
                 "edgerl.runtime.planners.local.synthetic:SyntheticPlanner",
                 "--host", "0.0.0.0", "--port", "0"])
    assert code == 1
    assert "requires a shared secret" in capsys.readouterr().err
