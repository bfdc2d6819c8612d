"""The language planner trained once per session (64 envs x 250 expert steps, 20 epochs:
~10 s on an idle 2-core machine) and exported to an ONNX bundle, shared by the tests here."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def cfg() -> Any:
    """Small but real: 85 % held-out success when this was written (the full-size run in
    docs/benchmarks.md reaches more)."""
    from edgerl.policies.language.config import LanguagePlannerConfig

    return LanguagePlannerConfig(demo_envs=64, demo_steps=250, epochs=20, batch_size=128,
                                 eval_envs=40, eval_episodes=80)


@pytest.fixture(scope="session")
def trained(tmp_path_factory, cfg) -> dict[str, Any]:
    """Head, training info, train / held-out phrasings, ONNX bundle, 8 observations, encoder."""
    import torch

    from edgerl.export.encoder_onnx import export_language_bundle
    from edgerl.policies.language.instructions import instruction_sets, make_task_env
    from edgerl.policies.language.manifest import make_language_spec
    from edgerl.policies.language.train import train_language_planner
    from edgerl.policies.language_encoder import load_encoder

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        encoder, tokenizer = load_encoder()
        head, info = train_language_planner(cfg, encoder=encoder, tokenizer=tokenizer,
                                            show_progress=False)
        train_set, held = instruction_sets(cfg.task, encoder, tokenizer, cfg.n_held_out)
        env = make_task_env(cfg.task, 8, seed=123)
        obs = env.get_observations()["policy"].numpy()
        spec = make_language_spec(cfg, env.spec)
        env.close()
        bundle = tmp_path_factory.mktemp("lang") / "bundle"
        export_language_bundle(bundle, spec=spec, head=head, encoder=encoder,
                               tokenizer=tokenizer, instructions=train_set.flat(),
                               parity_obs=obs)
    finally:
        torch.set_num_threads(previous)
    return {"head": head, "info": info, "train": train_set, "held": held, "bundle": bundle,
            "obs": obs, "encoder": encoder, "tokenizer": tokenizer}
