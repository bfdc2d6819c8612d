"""The train / held-out split of a language task's paraphrases (pure Python, no numpy)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["split_paraphrases"]


def split_paraphrases(paraphrases: Mapping[str, Sequence[str]], n_held_out: int
                      ) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Split each instruction's paraphrases: the last ``n_held_out`` are held out.

    Args:
        paraphrases: Canonical instruction -> its paraphrases (the same count for each).
        n_held_out: Paraphrases per instruction held out, in ``[0, count - 1]``.

    Returns:
        (train, held_out): canonical instruction -> list of paraphrases; ``train`` starts
        with the canonical instruction itself.
    """
    n_total = min(len(p) for p in paraphrases.values())
    if not 0 <= n_held_out < n_total:
        raise ValueError(f"n_held_out must be in [0, {n_total - 1}], got {n_held_out}")
    cut = n_total - n_held_out
    train = {inst: [inst, *p[:cut]] for inst, p in paraphrases.items()}
    held = {inst: list(p[cut:]) for inst, p in paraphrases.items()}
    return train, held
