"""``edgerl export RUN --out BUNDLE``: a training run -> a deployable, parity-checked bundle."""

from __future__ import annotations

import argparse
from pathlib import Path

from edgerl.apps.cli import flags

HELP = "export a training run to a bundle (policy.onnx, manifest.json, parity.json, ...)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", type=Path, help="training run directory (runs/<task>__<method>__...)")
    p.add_argument("--checkpoint", type=Path, default=None,
                   help="checkpoint file in the run (default: the newest)")
    onnx = p.add_argument_group("ONNX and other formats")
    onnx.add_argument("--opset", type=int, default=17, help="ONNX opset, 13-20 (default 17)")
    onnx.add_argument("--exporter", choices=("torchscript", "dynamo"), default="torchscript",
                      help="torch.onnx exporter (default torchscript: minimal op set)")
    onnx.add_argument("--fp16", action="store_true",
                      help="also write policy_fp16.onnx (fp16 compute) and build the TensorRT "
                           "engine in fp16")
    onnx.add_argument("--trt", action="store_true",
                      help="build a TensorRT engine and check it against onnxruntime (needs "
                           "tensorrt and a CUDA GPU)")
    onnx.add_argument("--c-header", action="store_true",
                      help="write policy.h (plain C99 MLP forward pass) and check it with gcc")
    parity = flags.add_episode_flags(p, num_envs=(8, "envs used for recording"),
                                     seed=(0, "seed for recording and random inputs"))
    parity.add_argument("--recorded", type=int, default=1000,
                        help="parity observations recorded from the task (default 1000)")
    parity.add_argument("--random", type=int, default=1000,
                        help="extra random parity observations (default 1000)")
    out = flags.add_output_flags(p, json="the report as JSON")
    out.add_argument("--out", type=Path, required=True, help="bundle directory to write")
    out.add_argument("--sign-key", type=Path, default=None,
                     help="ed25519 private key (PEM, from `edgerl keygen`): also write "
                          "manifest.sig (needs the 'sign' extra)")


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.errors import CliError

    if args.recorded + args.random < 1000:
        raise CliError("--recorded + --random must give >= 1000 parity observations")
    if args.trt:  # fail fast, before loading torch models and simulators
        from edgerl.export.tensorrt import tensorrt_status

        ok, msg = tensorrt_status()
        if not ok:
            raise CliError(f"--trt: {msg}")

    from edgerl.apps.cli.output import print_json, print_table
    from edgerl.contract.methods import get_method
    from edgerl.export.bundle import collect_parity_inputs, export_bundle
    from edgerl.export.c_header import CHeaderError
    from edgerl.export.onnx_export import ExportError
    from edgerl.export.tensorrt import TensorRTUnavailable
    from edgerl.policies.runs import load_policy

    try:
        loaded = load_policy(args.run, checkpoint=args.checkpoint)
    except (OSError, ValueError, KeyError) as exc:
        raise CliError(f"cannot load run {args.run}: {exc}") from exc
    if loaded.actor is None:
        raise CliError(f"run {args.run} (method {loaded.spec.method}) has no learned policy "
                       "network to export")
    not_deployable = get_method(loaded.spec.method).not_deployable
    if loaded.config.privileged:
        not_deployable = ("the privileged upper bound: it reads the task's privileged "
                          "observation (the goal), which a robot's fast loop does not have")
    if not_deployable:
        raise CliError(f"run {args.run} is not deployable: {not_deployable}")
    try:
        env = loaded.make_env(args.num_envs, seed=args.seed) if args.recorded > 0 else None
    except Exception as exc:  # the task or its wrappers cannot be built here
        raise CliError(f"cannot build the run's environment to record parity inputs: {exc}"
                       " (use --recorded 0 for random inputs only)") from exc
    try:
        spec = loaded.spec
        obs = collect_parity_inputs(
            loaded.actor.input_dim, env=env, n_recorded=args.recorded, n_random=args.random,
            seed=args.seed, action_low=spec.action.low, action_high=spec.action.high)
    except ExportError as exc:
        raise CliError(str(exc)) from exc
    finally:
        if env is not None:
            env.close()
    try:
        report = export_bundle(loaded.actor, loaded.spec, args.out, obs,
                               planner=loaded.planner, opset=args.opset, fp16=args.fp16,
                               c_header=args.c_header, trt=args.trt, exporter=args.exporter,
                               sign_key=args.sign_key)
    except (ExportError, CHeaderError, TensorRTUnavailable, RuntimeError) as exc:
        raise CliError(str(exc)) from exc
    if args.json:
        print_json(report.to_dict())
        return 0
    print_table(report.rows(), title=f"edgerl export {args.out}: parity",
                columns=["check", "candidate", "observations", "rollouts", "max_abs_err",
                         "tolerance", "ok"])
    compat = report.trt_compat
    if compat is not None:
        status = "ok" if compat.ok else "; ".join(compat.errors)
        print(f"TensorRT compatibility (opset {compat.opset}, ops {', '.join(compat.ops)}): "
              f"{status}")
    for note in report.notes:
        print(f"note: {note}")
    print(f"wrote {args.out}: {', '.join(report.spec.files)} + manifest.json "
          f"({report.seconds:.1f} s)")
    return 0
