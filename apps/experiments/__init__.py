"""edgerl.apps.experiments: the experiment drivers and the results docs.

An experiment is declared in the store (``experiments/<question>/<name>.toml``: what it is for,
which driver runs it and with what settings); ``edgerl experiment run CONFIG`` runs its driver
(``--dry-run`` lists the commands it would issue) and the driver writes its results through
:mod:`edgerl.contract.results_store` into ``experiments/<question>/results/``.
``edgerl results docs`` regenerates docs/results.md, docs/benchmarks.md and the README's
result tables from the store (:mod:`edgerl.apps.experiments.report`).

An apps-layer package: it may import every layer. The CLI verb modules import it; it does not
import the CLI.
"""
