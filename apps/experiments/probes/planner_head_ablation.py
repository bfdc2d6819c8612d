"""Why the language planner uses a grounded head: plain MLP vs GroundedChunkHead on arm_reach.

Same expert demos, same paraphrase conditioning, same epochs; success of the planner alone
(no delay, replanning every P steps) on training and held-out phrasings.

    python -m edgerl.apps.experiments.probes.planner_head_ablation [--epochs 30]
"""

from __future__ import annotations

import argparse
import json

import torch

from edgerl.policies.bc_planner import BCChunkPlanner, chunk_labels, fit_bc
from edgerl.policies.language.config import LanguagePlannerConfig
from edgerl.policies.language.evaluate import evaluate_language_planner
from edgerl.policies.language.instructions import instruction_sets, make_task_env
from edgerl.policies.language.train import collect_language_demos, train_language_planner
from edgerl.policies.language_encoder import load_encoder


class _PlainHead(torch.nn.Module):
    """BCChunkPlanner on ``[obs | embedding]`` behind the (obs, embedding) call signature."""

    def __init__(self, net: BCChunkPlanner) -> None:
        super().__init__()
        self.net = net

    def forward(self, obs: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, emb], dim=-1))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=30)
    args = p.parse_args()
    torch.set_num_threads(1)
    cfg = LanguagePlannerConfig(epochs=args.epochs)
    enc, tok = load_encoder()
    train, held = instruction_sets(cfg.task, enc, tok, cfg.n_held_out)
    out = {}
    grounded, info = train_language_planner(cfg, encoder=enc, tokenizer=tok,
                                            show_progress=False)
    out["grounded"] = {"loss": info["loss_last"]}
    env = make_task_env(cfg.task, cfg.demo_envs, cfg.seed + 10_000)
    demos, ids = collect_language_demos(env, cfg.demo_steps, cfg.expert_noise, cfg.seed, False)
    env.close()
    labels = chunk_labels(demos.actions, demos.dones, cfg.horizon)
    low, high = env.spec.action_low, env.spec.action_high
    labels = labels.clamp(min(low), max(high))
    gen = torch.Generator().manual_seed(cfg.seed)
    flat = ids.reshape(-1)
    k = torch.randint(0, train.embeddings.shape[1], flat.shape, generator=gen)
    x = torch.cat([demos.obs.reshape(-1, demos.obs.shape[-1]), train.embeddings[flat, k]], -1)
    net = BCChunkPlanner(env.spec.obs_dim, env.spec.action_dim, cfg.horizon, low, high,
                         hidden_dims=cfg.hidden_dims, cond_dim=train.embeddings.shape[-1])
    losses = fit_bc(net, x, labels.reshape(-1, cfg.horizon, env.spec.action_dim),
                    epochs=cfg.epochs, show_progress=False)
    out["plain_mlp"] = {"loss": losses[-1]}
    for name, head in (("grounded", grounded), ("plain_mlp", _PlainHead(net))):
        for split, phr in (("train_phrasings", train), ("held_out", held)):
            res = evaluate_language_planner(head, phr, cfg, show_progress=False)
            out[name][split] = res.success_rate
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
