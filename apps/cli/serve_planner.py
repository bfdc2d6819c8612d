"""``edgerl serve-planner``: serve a planner bundle, a behaviour-cloned planner (``--bc
TASK``, for ``edgerl train TASK --planner remote:HOST:PORT``) or your own Planner over TCP.

Protocol: length-prefixed msgpack frames, see docs/planner.md. Binding beyond loopback needs
a shared secret (``--secret-file`` or ``EDGERL_PLANNER_SECRET``) or named client keys. Runs
until Ctrl-C.

Client identities: ``--client-keys FILE`` (a JSON object ``{"robot-1": {"secret_file":
"robot-1.key", "max_priority": "robot"}, "trainer": {"secret_file": "trainer.key",
"max_priority": "training"}}``, relative paths from the file's folder) or ``--client-key
NAME:PRIORITY:SECRET_FILE`` (repeatable) give each client its own secret and the most urgent
priority it may claim: a client names its key id in its hello, and a request above its key's
priority is refused (``priority_denied``). A client naming no key uses the shared secret,
which allows every priority.
"""

from __future__ import annotations

import argparse
import importlib
import logging
from typing import Any

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

HELP = "serve a language planner bundle (or a Planner factory) to RemotePlanner clients over TCP"

log = logging.getLogger(__name__)

#: The server's limits and timeouts: (flag, type, default, help).
_LIMITS: tuple[tuple[str, type, float | None, str], ...] = (
    ("--idle-timeout", float, 60.0, "close a connection silent for this long (s, default 60)"),
    ("--read-timeout", float, 2.0, "a frame must be complete this long after its first byte (s)"),
    ("--max-frame", int, 1 << 20, "largest accepted request in bytes (default 1 MiB)"),
    ("--max-clients", int, 128, "connection limit (default 128)"),
    ("--obs-dim", int, None, "refuse observations of another size (default: the bundle's)"),
    ("--max-batch-rows", int, 256, "largest planner batch and plan_batch request (default 256)"),
    ("--batch-window-ms", float, 2.0, "wait this long for requests to join a batch (default 2 "
                                      "ms)"),
    ("--rows-per-s", float, 100000.0, "work quota per client, observation rows per second "
                                      "(default 100000)"),
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--bundle", help="language planner bundle directory (manifest.json, "
                                      "planner.onnx, encoder.onnx ...)")
    src.add_argument("--planner", metavar="MODULE:FACTORY",
                     help="your own planner: FACTORY() returns an edgerl.contract.planner.Planner "
                          "(e.g. a pi0 / SmolVLA / GR00T wrapper)")
    src.add_argument("--bc", metavar="TASK",
                     help="fit the behaviour-cloned chunk planner of TASK (as `edgerl train "
                          "TASK --planner bc` does, same --seed/--delay-steps/--horizon) and "
                          "serve it")
    bc = flags.add_episode_flags(p, seed=(0, "--bc: seed (default 0)"))
    bc.add_argument("--delay-steps", type=int, default=0, help="--bc: delay D (default 0)")
    bc.add_argument("--horizon", type=int, default=0, help="--bc: chunk rows (0 = automatic)")
    bc.add_argument("--method", default="edit", help="--bc: training method (default edit)")
    net = p.add_argument_group("network")
    net.add_argument("--host", default="127.0.0.1",
                     help="interface to bind (default 127.0.0.1; 0.0.0.0 for all)")
    net.add_argument("--port", type=int, default=7700, help="TCP port (default 7700; 0 = any)")
    net.add_argument("--secret-file", default=None,
                     help="shared secret for HMAC frame tags (>= 16 bytes; default: "
                          "EDGERL_PLANNER_SECRET, else none, allowed on loopback only); its "
                          "clients may claim every priority")
    net.add_argument("--client-keys", metavar="FILE", default=None,
                     help="named client keys, a JSON object: key id -> {\"secret_file\": "
                          "PATH, \"max_priority\": \"robot\" or \"training\"} (relative "
                          "paths from FILE's folder). A client names its key id in its hello "
                          "and may claim that priority at most (priority_denied above it)")
    net.add_argument("--client-key", metavar="NAME:PRIORITY:SECRET_FILE", action="append",
                     default=[], help="one named client key (repeatable; e.g. "
                                      "trainer:training:/etc/edgerl/trainer.key), as in "
                                      "--client-keys")
    limits = p.add_argument_group("limits")
    for flag, kind, default, text in _LIMITS:
        limits.add_argument(flag, type=kind, default=default, help=text)
    limits.add_argument("--inline", action="store_true",
                        help="run the planner on the I/O thread (sub-millisecond planners only: "
                             "fewer thread hand-offs per request, no I/O while it computes)")
    limits.add_argument("--no-admission", action="store_true",
                        help="accept work that cannot meet its deadline (for comparisons only)")
    flags.add_compute_flags(p, threads=(1, "onnxruntime threads per session"),
                            device=("cpu", "onnxruntime device of the language planner (auto: "
                                           "TensorRT EP, else CUDA EP, else CPU; default cpu)"),
                            device_choices=("auto", "cpu", "cuda", "tensorrt"))


def _load_factory(spec: str):  # -> Planner
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise CliError(f"--planner must look like 'package.module:factory', got {spec!r}")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise CliError(f"--planner {spec}: {exc}") from exc
    planner = factory()
    for name in ("plan", "health", "info"):
        if not hasattr(planner, name):
            raise CliError(f"--planner {spec}: the object it returns has no {name!r} "
                           "(needs the edgerl.contract.planner.Planner interface)")
    return planner


def _bc_planner(args: argparse.Namespace):  # -> (BCServedPlanner, obs_dim)
    """Fit the BC chunk planner exactly as ``edgerl train TASK --planner bc`` does."""
    import torch

    from edgerl.contract.serde import SchemaError
    from edgerl.policies.config import TrainConfig
    from edgerl.policies.methods import build_planner
    from edgerl.policies.remote_planner import BCServedPlanner
    from edgerl.sim.registry import get_task_info

    torch.set_num_threads(1)
    try:
        get_task_info(args.bc)
        cfg = TrainConfig(task=args.bc, method=args.method, planner="bc", seed=args.seed,
                          delay_steps=args.delay_steps, horizon=args.horizon)
    except (KeyError, SchemaError) as exc:
        raise CliError(str(exc.args[0] if isinstance(exc, KeyError) else exc)) from exc
    net, info = build_planner(cfg, show_progress=False)
    log.info("fitted the BC planner of %s: %d samples, loss %.4f -> %.4f", args.bc,
             info["samples"], info["loss_first"], info["loss_last"])
    control_dt = 1.0 / get_task_info(args.bc).control_hz
    planner = BCServedPlanner(net, dt_s=control_dt, period_s=cfg.resolved_period * control_dt)
    return planner, net.obs_dim


def _client_keys(args: argparse.Namespace) -> dict:  # -> {key id: ClientKey}
    """The named client keys of ``--client-keys`` and ``--client-key`` (a key id given twice
    is an error)."""
    from edgerl.runtime.planners.server.config import load_client_keys, parse_client_key

    keys = load_client_keys(args.client_keys) if args.client_keys else {}
    for spec in args.client_key:
        key_id, key = parse_client_key(spec)
        if key_id in keys:
            raise ValueError(f"client key {key_id!r} is given twice")
        keys[key_id] = key
    return keys


def run(args: argparse.Namespace) -> int:
    from edgerl.contract.serde import SchemaError
    from edgerl.contract.spec import BundleError
    from edgerl.runtime.inference import InferenceError
    from edgerl.runtime.planners.protocol.auth import load_secret
    from edgerl.runtime.planners.server.config import (
        Batching,
        ConnectionLimits,
        ServerConfig,
        WorkQuotas,
    )
    from edgerl.runtime.planners.server.server import PlannerServer

    if not 0 <= args.port < 65536:
        raise CliError(f"--port must be in 0..65535, got {args.port}")
    obs_dim = args.obs_dim
    if args.bundle:
        from edgerl.runtime.planners.local.language import OnnxLanguagePlanner

        try:
            planner = OnnxLanguagePlanner(args.bundle, threads=args.threads,
                                          device=args.device)
        except (BundleError, SchemaError, FileNotFoundError, InferenceError) as exc:
            raise CliError(str(exc)) from exc
        obs_dim = obs_dim or planner.obs_dim
        log.info("loaded %s: task %s, H=%d, %d cached instructions", args.bundle,
                 planner.spec.task, planner.info.horizon, len(planner.instructions))
    elif args.bc:
        planner, obs_dim = _bc_planner(args)
    else:
        planner = _load_factory(args.planner)
    try:
        secret = load_secret(args.secret_file)
        client_keys = _client_keys(args)
        config = ServerConfig(host=args.host, port=args.port, max_frame=args.max_frame,
                              max_clients=args.max_clients, obs_dim=obs_dim, secret=secret,
                              client_keys=client_keys,
                              connections=ConnectionLimits(idle_timeout_s=args.idle_timeout,
                                                           read_timeout_s=args.read_timeout),
                              batching=Batching(max_batch_rows=args.max_batch_rows,
                                                batch_window_s=args.batch_window_ms / 1000.0,
                                                inline=args.inline),
                              quotas=WorkQuotas(rows_per_s=args.rows_per_s,
                                                admission=not args.no_admission))
        server = PlannerServer(planner, config)
    except (OSError, ValueError) as exc:
        raise CliError(str(exc)) from exc
    try:
        host, port = server.start()
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc}") from exc
    auth = "off"
    if secret or client_keys:
        auth = "hmac-sha256, " + ", ".join((["shared secret"] if secret else []) + [
            f"key {k!r} up to {v.max_priority}" for k, v in sorted(client_keys.items())])
    log.info("serving planner on %s:%d (protocol v1, auth %s, Ctrl-C to stop)", host, port,
             auth)
    restore = _stop_on_signals()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        log.info("stopping: %s", server.metrics())
        server.stop()
    finally:
        restore()
    return 0


def _stop_on_signals() -> Any:
    """SIGINT and SIGTERM stop the server cleanly, also when it was started as a background
    job (a non-interactive shell starts those with SIGINT ignored, and Python then installs
    no handler: ``kill -INT`` did nothing). Returns the function that restores the old
    handlers."""
    import signal

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    old = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}

    def restore() -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    return restore
