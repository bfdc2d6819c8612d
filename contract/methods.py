"""The one registry of methods: name -> :class:`Method`, each property a field.

A method is how a policy copes with planner/inference delay. Every layer (the sim wrappers,
training configs, the runtime loop, export, the CLI and the result tables) asks this table
instead of listing names, so a new method is one entry here:

====================  ======================================================================
``nodelay``           the plain task (reference; D = 0)
``naive``             same policy, its actions applied D steps late
``arli``              delayed like ``naive``; obs augmented with the committed actions and
                      the mid-inference observation
``edit``              planner chunk (available D steps after its query) + bounded residual
                      from the newest fast observation (EXPO-FT style); obs =
                      ``edgerl.build_edit_obs``
``edit_zero_chunks``  ablation: ``edit`` with every chunk zero (the planner's information
                      removed, everything else equal)
``planner``           the planner's chunk rows executed open loop (no learning)
``blend``             chunk blend over the overlap of old and new chunks (no learning)
``rtc``               real-time chunking: the planner is asked with the committed prefix (the
                      rows executed during its delay) and continues from it; a
                      prefix-conditioned BC planner (``--planner bc``)
====================  ======================================================================

Contract layer: plain Python, no imports beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHUNK_METHODS", "EDIT_METHODS", "LEARNED_METHODS", "METHODS", "OPEN_LOOP_METHODS",
           "SCHEDULED_METHODS", "Method", "get_method", "method_names"]


@dataclass(frozen=True)
class Method:
    """One method and what the rest of edgerl needs to know about it.

    Attributes:
        name: Registry key, e.g. ``"edit"``.
        summary: One line: the legend of the result tables.
        learned: Trains a PPO policy (the others only execute planner chunks).
        residual: The policy is a bounded residual on a chunk row (``edit`` and its ablation).
        uses_planner: Runs a chunk planner (``edit_zero_chunks`` runs none: its chunks are 0).
        action_delayed: The policy's own actions are applied D steps late (``naive``/``arli``).
        zero_chunks: Every chunk row is zero (the planner's information removed).
        conditions_on_prefix: The planner is asked with the committed prefix (``rtc``): it
            needs a prefix-conditioned planner.
        blends: Consecutive chunks are blended over their overlap (``blend``).
        no_delay: Runs with D = 0 whatever the config says; alone may read privileged
            observations (the upper bound of the result tables).
        not_deployable: Why a robot cannot run it ("" = it can).
    """

    name: str
    summary: str
    learned: bool = False
    residual: bool = False
    uses_planner: bool = False
    action_delayed: bool = False
    zero_chunks: bool = False
    conditions_on_prefix: bool = False
    blends: bool = False
    no_delay: bool = False
    not_deployable: str = ""

    @property
    def scheduled(self) -> bool:
        """Chunk rows are scheduled (query, arrival, age), real or zero."""
        return self.uses_planner or self.residual

    @property
    def open_loop(self) -> bool:
        """The chunk row is the action (no learned policy on top)."""
        return self.uses_planner and not self.learned


_REGISTRY: dict[str, Method] = {m.name: m for m in (
    Method("nodelay", "privileged upper bound: reads the goal the planner knows, acts with no "
           "delay", learned=True, no_delay=True),
    Method("naive", "a PPO policy on the planner's observation, its action applied D steps "
           "late", learned=True, action_delayed=True),
    Method("arli", "naive + the committed actions and the mid-inference observation",
           learned=True, action_delayed=True),
    Method("edit", "planner chunks + a learned bounded residual from the fast observation each "
           "tick",
           learned=True, residual=True, uses_planner=True),
    Method("edit_zero_chunks", "ablation: the same edit network and budget, every chunk zero",
           learned=True, residual=True, zero_chunks=True,
           not_deployable="an ablation trained on all-zero chunks; a robot's planner would "
                          "feed it real ones"),
    Method("planner", "the planner's chunks alone, open loop, at the same delay",
           uses_planner=True),
    Method("blend", "training-free linear blend of consecutive chunks over their overlap",
           uses_planner=True, blends=True),
    Method("rtc", "real-time chunking: a BC planner that continues the committed prefix, open loop",
           uses_planner=True, conditions_on_prefix=True),
)}


def method_names(**where: bool) -> tuple[str, ...]:
    """Names of the methods whose fields equal ``where`` (all of them without arguments),
    in registry order: ``method_names(learned=True)``."""
    return tuple(m.name for m in _REGISTRY.values()
                 if all(getattr(m, k) == v for k, v in where.items()))


def get_method(name: str) -> Method:
    """The :class:`Method` called ``name``; ``ValueError`` listing the known ones otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r}; choose one of "
                         f"{', '.join(_REGISTRY)}") from None


#: Every method, in registry order.
METHODS = method_names()
#: Methods trained with PPO.
LEARNED_METHODS = method_names(learned=True)
#: Methods whose policy is a bounded residual on a chunk row.
EDIT_METHODS = method_names(residual=True)
#: Methods that run a chunk planner.
CHUNK_METHODS = method_names(uses_planner=True)
#: Methods whose chunk rows are scheduled (real or zero).
SCHEDULED_METHODS = tuple(m.name for m in _REGISTRY.values() if m.scheduled)
#: Methods that execute the planner's chunk rows as the action.
OPEN_LOOP_METHODS = tuple(m.name for m in _REGISTRY.values() if m.open_loop)
