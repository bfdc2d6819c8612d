"""Language data of the planar-arm pushing task (same interface as :mod:`.arm_language`).

Directions are in the world frame as seen by a viewer at -x looking along +x: ``left`` = +y,
``right`` = -y, ``forward`` = +x (away from the viewer), ``back`` = -x.

- :data:`COLORS`: puck colours in observation order.
- :data:`DIRECTIONS`: direction name -> unit vector (x, y).
- :data:`INSTRUCTIONS`: id ``i`` = colour ``i // 4``, direction ``i % 4``
  ("push the red block to the left", ...).
- :data:`PARAPHRASES`: canonical instruction -> 10 paraphrases; :func:`paraphrase_split`.
"""

from __future__ import annotations

from edgerl.sim.tasks.paraphrases import split_paraphrases

__all__ = ["COLORS", "DIRECTIONS", "INSTRUCTIONS", "PARAPHRASES", "instruction_parts",
           "paraphrase_split"]

#: Puck colours, in observation order.
COLORS: tuple[str, ...] = ("red", "green", "blue")

#: Direction name -> world-frame unit vector (x, y).
DIRECTIONS: dict[str, tuple[float, float]] = {
    "left": (0.0, 1.0), "right": (0.0, -1.0), "forward": (1.0, 0.0), "back": (-1.0, 0.0)}

_CANONICAL_DIR = {"left": "to the left", "right": "to the right", "forward": "forward",
                  "back": "back"}
# one phrasing per paraphrase template (index-aligned with _TEMPLATES)
_DIR_WORDS: dict[str, tuple[str, ...]] = {
    "left": ("leftward", "to the left side", "left", "towards the left", "over to the left",
             "a bit left", "leftwards", "to your left", "left a little", "toward the left"),
    "right": ("rightward", "to the right side", "right", "towards the right",
              "over to the right", "a bit right", "rightwards", "to your right",
              "right a little", "toward the right"),
    "forward": ("away", "further away", "forwards", "away from you", "ahead", "a bit forward",
                "away from the viewer", "out", "forward a little", "further out"),
    "back": ("backward", "closer", "backwards", "towards you", "back toward you", "a bit back",
             "toward the viewer", "in", "back a little", "nearer"),
}
_TEMPLATES: tuple[str, ...] = (
    "shove the {c} block {d}",
    "slide the {c} puck {d}",
    "move the {c} block {d}",
    "nudge the {c} one {d}",
    "push {c} {d}",
    "give the {c} block a push {d}",
    "the {c} puck should go {d}",
    "bump the {c} disc {d}",
    "get the {c} block to move {d}",
    "push the {c} piece {d}",
)

#: Canonical instruction per id.
INSTRUCTIONS: tuple[str, ...] = tuple(
    f"push the {c} block {_CANONICAL_DIR[d]}" for c in COLORS for d in DIRECTIONS)

#: Canonical instruction -> paraphrases (10 each).
PARAPHRASES: dict[str, tuple[str, ...]] = {
    INSTRUCTIONS[ci * len(DIRECTIONS) + di]: tuple(
        t.format(c=c, d=_DIR_WORDS[d][k]) for k, t in enumerate(_TEMPLATES))
    for ci, c in enumerate(COLORS) for di, d in enumerate(DIRECTIONS)
}


def instruction_parts(instruction_id: int) -> tuple[int, str]:
    """(colour index, direction name) of an instruction id."""
    if not 0 <= instruction_id < len(INSTRUCTIONS):
        raise ValueError(f"instruction id must be in [0, {len(INSTRUCTIONS)}), "
                         f"got {instruction_id}")
    return instruction_id // len(DIRECTIONS), list(DIRECTIONS)[instruction_id % len(DIRECTIONS)]


def paraphrase_split(n_held_out: int = 3) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """``(train, held_out)`` push paraphrases: the last ``n_held_out`` of each instruction
    are held out; ``train`` starts with the canonical text (:func:`split_paraphrases`)."""
    return split_paraphrases(PARAPHRASES, n_held_out)
