"""A language task's instructions: paraphrase sets and their embeddings, the observation's
object slots, and the task env the planner is trained and evaluated on.

Each instruction has several paraphrases; training draws from the *training* phrasings, and
evaluation uses the ones held out (the split is the task's ``paraphrase_split``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from edgerl.policies.language_encoder import SentenceEncoder
from edgerl.runtime.planners.local.language import InstructionTokenizer

__all__ = ["InstructionSet", "instruction_ids", "instruction_sets", "language_module",
           "make_task_env", "slot_layout"]


@dataclass
class InstructionSet:
    """Paraphrases per instruction id and their embeddings.

    Attributes:
        texts: ``texts[i]`` = the phrasings of instruction ``i``.
        embeddings: ``(I, K, 384)`` float32, ``embeddings[i, k]`` embeds ``texts[i][k]``
            (``K`` = phrasings per instruction; all instructions have the same count).
    """

    texts: list[list[str]]
    embeddings: torch.Tensor

    def flat(self) -> list[str]:
        return [t for group in self.texts for t in group]


def language_module(task: str) -> Any:
    """The sim module holding ``task``'s instructions, colours and paraphrases (its
    registry entry's ``language``)."""
    import importlib

    from edgerl.sim.registry import get_task_info, list_tasks

    try:
        module = get_task_info(task).language
    except KeyError:
        module = ""
    if not module:
        known = ", ".join(t.name for t in list_tasks() if t.language)
        raise ValueError(f"no paraphrase data for task {task!r} (known: {known})")
    return importlib.import_module(module)


def instruction_sets(task: str, encoder: SentenceEncoder, tokenizer: InstructionTokenizer,
                     n_held_out: int = 3) -> tuple[InstructionSet, InstructionSet]:
    """``(train, held_out)`` paraphrase sets of ``task`` with their embeddings."""
    lang = language_module(task)
    train, held = lang.paraphrase_split(n_held_out)
    out = []
    for split in (train, held):
        texts = [list(split[inst]) for inst in lang.INSTRUCTIONS]
        flat = [t for group in texts for t in group]
        emb = torch.from_numpy(encoder.embed(flat, tokenizer))
        out.append(InstructionSet(texts, emb.view(len(texts), len(texts[0]), -1)))
    return out[0], out[1]


def make_task_env(task: str, num_envs: int, seed: int) -> Any:
    """The registered task env (no wrappers)."""
    from edgerl.sim.registry import make_task

    return make_task(task, num_envs=num_envs, seed=seed)


def instruction_ids(env: Any) -> torch.Tensor:
    """int64 (N,) instruction id of every env of ``env``: a copy (the env updates its numpy
    array in place at resets)."""
    return torch.tensor(np.asarray(env.instruction_id), dtype=torch.int64)


def slot_layout(task: str, obs_names: list[str]) -> tuple[list[int], list[list[int]]]:
    """``(robot_index, slot_index)`` of ``task``'s observation: one slot per instruction."""
    lang = language_module(task)
    slots = [[obs_names.index(f"{c}_target_{a}") for a in "xy"] for c in lang.COLORS]
    used = {i for s in slots for i in s}
    return [i for i in range(len(obs_names)) if i not in used], slots
