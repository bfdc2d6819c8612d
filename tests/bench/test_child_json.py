"""``edgerl.bench.child_json``: a child ``edgerl`` command's JSON, or an error naming it."""

from __future__ import annotations

import pytest

from edgerl.bench.child_json import edgerl_json


def test_a_failing_command_is_named_with_its_exit_code_and_stderr():
    named = r"(?s)edgerl no-such-command exited 2: .*invalid choice"
    with pytest.raises(RuntimeError, match=named):
        edgerl_json(["no-such-command"], timeout=120)
