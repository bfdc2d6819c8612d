"""The ``[run]`` table of an ``rlif_chain`` config (:mod:`.rlif_chain`): :class:`Params`, its
settings in small groups by concern (the start's weakening, the collection, the fine-tuning,
the evaluation, the extra cells, the processes). A config names each setting by its own name
(``collect = 20``, a variant's ``explore_std = 0.3``): :func:`edgerl.contract.config_groups.build`
finds its group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Cells", "Collection", "Evaluation", "Finetuning", "Params", "Processes", "Weakening"]


@dataclass
class Weakening:
    """How each seed's start is made from the base bundle.

    Attributes:
        shrink: Uniform weakening: the edit policy's output scaled by this.
        noise: Uniform weakening: noise added to its weights.
        region: Weaken only in this region of the state space instead (``weaken-region``
            spec; ``""``: uniform).
    """

    shrink: float = 0.35
    noise: float = 0.1
    region: str = ""


@dataclass
class Collection:
    """How the operator's takeovers are collected.

    Attributes:
        collect: HIL episodes per collection.
        operator: The scripted operator (``edgerl hil --operator`` spec, seed added per
            collection).
        explore_std: Noise on the RLIF bundle's residual while it is in control (chain).
    """

    collect: int = 30
    operator: str = "theta=0.2,x=1.5,hold=15,gain=0.6,noise=0.2"
    explore_std: float = 0.0


@dataclass
class Finetuning:
    """How the bundles are fine-tuned on the recordings.

    Attributes:
        steps: ``edgerl finetune --steps``.
        rlif_args: The chain's RLIF fine-tuning flags.
        from_start: The chain fine-tunes each round from the start (else from the last
            round's bundle).
    """

    steps: int = 2000
    rlif_args: str = "--method rlif --actor-data own"
    from_start: bool = False


@dataclass
class Evaluation:
    """How every bundle is evaluated (plant seed ``1000 + seed``).

    Attributes:
        episodes: HIL episodes per evaluation.
        latency_ms: Planner latency of every HIL run (ms).
        eval_rounds: The chain also evaluates each round's bundle but the last.
    """

    episodes: int = 20
    latency_ms: float = 100.0
    eval_rounds: bool = False


@dataclass
class Cells:
    """The cells beside start, RLIF and BC.

    Attributes:
        controls: The base bundle, and (one collection) RLIF with ``--beta 0``.
        own: One collection: RLIF on its own actions (``--actor-data own``).
        qmax: One collection: RLIF extracting with ``--extract qmax``.
        no_noise_control: The chain again without ``explore_std``.
    """

    controls: bool = False
    own: bool = False
    qmax: bool = False
    no_noise_control: bool = False


@dataclass
class Processes:
    """How the run uses the machine.

    Attributes:
        nice: Collection and fine-tuning at ``nice`` 15.
        json_out: Per-run JSON (``{seed}``: per seed process; ``{out}``: the run's folder).
        parallel_seeds: Each seed in its own process, ``stagger_s`` apart.
        stagger_s: Seconds between the seed processes' starts.
    """

    nice: bool = False
    json_out: str = ""
    parallel_seeds: bool = False
    stagger_s: float = 20.0

    def __post_init__(self) -> None:
        if self.parallel_seeds and "{seed}" not in self.json_out:
            raise ValueError("parallel_seeds needs json_out naming {seed} (each seed's process "
                             "writes its own)")


@dataclass
class Params:
    """The ``[run]`` table of an ``rlif_chain`` config (defaults as the first runs had); its
    keys name the groups' settings by their own names (``collect = 20``).

    Attributes:
        base: The trained edit bundle the starts are weakened from.
        seeds: Seeds (each its own start, collections and fine-tuning).
        out: Run folder.
        rounds: Collect / fine-tune rounds of the chain (0: one collection).
        prepare: Steps before anything runs (:func:`.rlif_chain.run_prepare`).
        reeval: Re-evaluations after the run (:class:`~.rlif_reeval.ReevalSpec` settings
            and a ``label``).
        variants: The run again with these settings changed (and a ``label``).
    """

    base: str
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    out: str = "runs/rlif"
    rounds: int = 0
    weakening: Weakening = field(default_factory=Weakening)
    collection: Collection = field(default_factory=Collection)
    finetuning: Finetuning = field(default_factory=Finetuning)
    evaluation: Evaluation = field(default_factory=Evaluation)
    cells: Cells = field(default_factory=Cells)
    processes: Processes = field(default_factory=Processes)
    prepare: list[dict[str, Any]] = field(default_factory=list)
    reeval: list[dict[str, Any]] = field(default_factory=list)
    variants: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.rounds and not self.weakening.region:
            raise ValueError("rounds needs region (the region-weakened start)")
