"""One driver per kind of experiment (:mod:`edgerl.apps.experiments.registry` names them).

Each driver module defines ``Params`` (a dataclass: the ``[run]`` table of a config, with the
driver's defaults) and ``run(params, ex, ctx) -> Outcome``: the procedure, written against an
:class:`~edgerl.apps.experiments.execute.Executor` so that ``--dry-run`` walks the same steps.
"""
