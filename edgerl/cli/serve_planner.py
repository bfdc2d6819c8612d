"""``edgerl serve-planner``: serve a planner bundle (or your own Planner) over TCP.

Protocol: length-prefixed msgpack frames, see docs/planner.md. Runs until Ctrl-C.
"""

from __future__ import annotations

import argparse
import importlib
import logging

from edgerl.cli import CliError

HELP = "serve a language planner bundle (or a Planner factory) to RemotePlanner clients over TCP"

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--bundle", help="language planner bundle directory (manifest.json, "
                                      "planner.onnx, encoder.onnx ...)")
    src.add_argument("--planner", metavar="MODULE:FACTORY",
                     help="your own planner: FACTORY() returns an edgerl.planner.Planner "
                          "(e.g. a pi0 / SmolVLA / GR00T wrapper)")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to bind (default 127.0.0.1; 0.0.0.0 for all)")
    p.add_argument("--port", type=int, default=7700, help="TCP port (default 7700; 0 = any)")
    p.add_argument("--max-frame", type=int, default=1 << 20,
                   help="largest accepted request in bytes (default 1 MiB)")
    p.add_argument("--max-clients", type=int, default=16, help="connection limit (default 16)")
    p.add_argument("--obs-dim", type=int, default=None,
                   help="refuse observations of another size (default: the bundle's)")
    p.add_argument("--threads", type=int, default=1, help="onnxruntime threads per session")
    p.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda", "tensorrt"),
                   help="onnxruntime device of the language planner (auto: TensorRT EP, else "
                        "CUDA EP, else CPU; default cpu)")


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
                           "(needs the edgerl.planner.Planner interface)")
    return planner


def run(args: argparse.Namespace) -> int:
    from edgerl.runtime.inference import InferenceError
    from edgerl.runtime.planner_server import PlannerServer, ServerConfig
    from edgerl.serde import SchemaError
    from edgerl.spec import BundleError

    if not 0 <= args.port < 65536:
        raise CliError(f"--port must be in 0..65535, got {args.port}")
    obs_dim = args.obs_dim
    if args.bundle:
        from edgerl.runtime.language_planner import OnnxLanguagePlanner

        try:
            planner = OnnxLanguagePlanner(args.bundle, threads=args.threads,
                                          device=args.device)
        except (BundleError, SchemaError, FileNotFoundError, InferenceError) as exc:
            raise CliError(str(exc)) from exc
        obs_dim = obs_dim or planner.obs_dim
        log.info("loaded %s: task %s, H=%d, %d cached instructions", args.bundle,
                 planner.spec.task, planner.info.horizon, len(planner.instructions))
    else:
        planner = _load_factory(args.planner)
    server = PlannerServer(planner, ServerConfig(host=args.host, port=args.port,
                                                 max_frame=args.max_frame,
                                                 max_clients=args.max_clients, obs_dim=obs_dim))
    try:
        host, port = server.start()
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc}") from exc
    log.info("serving planner on %s:%d (protocol v1, Ctrl-C to stop)", host, port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        log.info("stopping: %s", server.metrics())
        server.stop()
    return 0
