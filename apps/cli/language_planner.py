"""``edgerl language-planner``: train the language-conditioned chunk planner by behaviour
cloning, evaluate it on held-out paraphrases, export the ONNX bundle ``serve-planner`` runs.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from edgerl.apps.cli import flags
from edgerl.apps.cli.errors import CliError

HELP = ("train the language planner (MiniLM + chunk head) by BC, evaluate on held-out "
        "paraphrases, export an ONNX bundle")

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", default="arm_reach", help="language task (default arm_reach)")
    p.add_argument("--horizon", type=int, default=None, help="chunk rows H (default 8)")
    p.add_argument("--period", type=int, default=None,
                   help="replanning period P in control steps (default 4)")
    p.add_argument("--demo-steps", type=int, default=None, help="expert steps per env")
    p.add_argument("--epochs", type=int, default=None, help="BC epochs")
    p.add_argument("--eval-episodes", type=int, default=None, help="held-out episodes")
    flags.add_episode_flags(p, seed=(0, "seed (default 0)"))
    p.add_argument_group("compute").add_argument(
        "--torch-threads", type=int, default=1,
        help="torch CPU threads (default 1: fair on a shared machine)")
    out = flags.add_output_flags(p, json="the summary as JSON")
    out.add_argument("--out", required=True, help="bundle directory to write")


def _measure_latency_s(bundle: Path, n: int = 50) -> float:
    """Median seconds of one uncached plan (tokenizer + encoder + head) with the bundle."""
    import time

    import numpy as np

    from edgerl.runtime.planners.local.language import OnnxLanguagePlanner

    planner = OnnxLanguagePlanner(bundle, cache=False)
    obs = np.zeros(planner.obs_dim, np.float32)
    text = (planner.instructions or ["reach the red target"])[0]
    samples = []
    for i in range(n + 5):
        t = time.perf_counter()
        planner.plan(obs, text, 0.0)
        if i >= 5:
            samples.append(time.perf_counter() - t)
    return float(np.median(samples))


def run(args: argparse.Namespace) -> int:
    import torch

    from edgerl.apps.cli.output import print_result
    from edgerl.export.encoder_onnx import export_language_bundle
    from edgerl.policies.language.config import LanguagePlannerConfig
    from edgerl.policies.language.evaluate import evaluate_language_planner
    from edgerl.policies.language.instructions import instruction_sets, make_task_env
    from edgerl.policies.language.manifest import make_language_spec
    from edgerl.policies.language.train import train_language_planner
    from edgerl.policies.language_encoder import EncoderWeightsError, load_encoder

    torch.set_num_threads(max(1, args.torch_threads))
    overrides = {k: v for k, v in (("horizon", args.horizon), ("period", args.period),
                                   ("demo_steps", args.demo_steps), ("epochs", args.epochs),
                                   ("eval_episodes", args.eval_episodes)) if v is not None}
    try:
        cfg = LanguagePlannerConfig(task=args.task, seed=args.seed, **overrides)
        encoder, tokenizer = load_encoder()
        train_set, held_set = instruction_sets(cfg.task, encoder, tokenizer, cfg.n_held_out)
    except (ValueError, EncoderWeightsError) as exc:
        raise CliError(str(exc)) from exc
    head, info = train_language_planner(cfg, encoder=encoder, tokenizer=tokenizer)
    results = {}
    for name, phrasings in (("train_phrasings", train_set), ("held_out_phrasings", held_set)):
        res = evaluate_language_planner(head, phrasings, cfg)
        results[name] = res.summary()
        log.info("%s: success %.3f over %d episodes", name, res.success_rate, res.episodes)
    env = make_task_env(cfg.task, 1, cfg.seed)
    spec = make_language_spec(cfg, env.spec)
    env.close()
    demo_env = make_task_env(cfg.task, 16, cfg.seed + 30_000)
    parity_obs = demo_env.get_observations()["policy"].cpu().numpy()
    demo_env.close()
    info.pop("net", None)
    spec = export_language_bundle(
        Path(args.out), spec=spec, head=head, encoder=encoder, tokenizer=tokenizer,
        instructions=train_set.flat() + held_set.flat(), parity_obs=parity_obs,
        extra={"training": info, "eval": results, "held_out": held_set.flat()})
    spec.chunk.expected_latency_s = _measure_latency_s(Path(args.out))
    spec.save(Path(args.out))
    summary = {"bundle": args.out, "task": cfg.task, "horizon": cfg.horizon,
               "period": cfg.period, "samples": info["samples"], "train_s": info["train_s"],
               "success_train_phrasings": results["train_phrasings"]["success_rate"],
               "success_held_out": results["held_out_phrasings"]["success_rate"],
               "episodes": results["held_out_phrasings"]["episodes"],
               "encoder_cosine_distance":
                   spec.extra["language"]["parity"]["encoder"]["max_cosine_distance"],
               "head_max_abs_error": spec.extra["language"]["parity"]["head"]["max_abs_error"],
               "expected_latency_ms": 1e3 * spec.chunk.expected_latency_s}
    print_result(summary, as_json=args.json, key="key", title="edgerl language-planner")
    return 0
