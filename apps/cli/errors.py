"""The CLI's user-facing error, in a module of its own so every verb can import it.

:class:`CliError` is :class:`edgerl.contract.errors.UserError` (the class the layers below the
CLI raise): ``edgerl VERB`` prints either as one ``edgerl VERB: error: ...`` line with exit
status 1. The verbs import it from here, not from the package :mod:`edgerl.apps.cli`, whose
``VERBS`` registry names every verb (importing the package from a verb would be a cycle).
"""

from __future__ import annotations

from edgerl.contract.errors import UserError

__all__ = ["CliError"]

#: A user-facing error, printed as ``edgerl VERB: error: ...`` with exit status 1. The same
#: class as :class:`edgerl.contract.errors.UserError`, which the layers below the CLI raise.
CliError = UserError
