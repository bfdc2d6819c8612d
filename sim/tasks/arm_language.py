"""Language data of the planar-arm task: colours, canonical instructions and paraphrases.

Pure data (no numpy/torch/MuJoCo), so planners and tokenizers can import it cheaply.

- :data:`COLORS`: target colours in the fixed order of the observation's target slots.
- :data:`INSTRUCTIONS`: canonical instruction ``i`` names ``COLORS[i]``; the env's
  ``instruction_id`` indexes this list (it is also ``TaskSpec.instructions``).
- :data:`PARAPHRASES`: canonical instruction -> >= 6 paraphrases (the canonical text is not
  among them). :func:`paraphrase_split` splits them into train / held-out lists the same way
  every time, so a language planner can be evaluated on phrasings it never saw.
"""

from __future__ import annotations

from edgerl.sim.tasks.paraphrases import split_paraphrases

__all__ = ["COLORS", "INSTRUCTIONS", "PARAPHRASES", "paraphrase_split"]

#: Target colours, in observation order (target slot k has colour COLORS[k]).
COLORS: tuple[str, ...] = ("red", "green", "blue", "yellow")

#: Canonical instruction per id (id == colour index).
INSTRUCTIONS: tuple[str, ...] = tuple(f"reach the {c} target" for c in COLORS)

_TEMPLATES: tuple[str, ...] = (
    "move to the {c} target",
    "go to the {c} one",
    "touch the {c} marker",
    "put the fingertip on the {c} target",
    "reach for the {c} disc",
    "bring the arm to the {c} goal",
    "the {c} target, please",
    "point at the {c} spot with the gripper",
    "navigate the end effector to {c}",
    "head over to the {c} circle",
)

#: Canonical instruction -> paraphrases (10 each; none equals a canonical instruction).
PARAPHRASES: dict[str, tuple[str, ...]] = {
    inst: tuple(t.format(c=c) for t in _TEMPLATES) for inst, c in zip(INSTRUCTIONS, COLORS)
}


def paraphrase_split(n_held_out: int = 3) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """``(train, held_out)`` reach paraphrases: the last ``n_held_out`` of each instruction
    are held out; ``train`` starts with the canonical text (:func:`split_paraphrases`)."""
    return split_paraphrases(PARAPHRASES, n_held_out)
