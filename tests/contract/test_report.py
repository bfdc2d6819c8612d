"""edgerl.contract.report (the printing the CLI re-exports) and edgerl.contract.errors.UserError
via the CLI."""

from __future__ import annotations

import json
import math
import sys

from edgerl.contract.errors import UserError
from edgerl.contract.report import finite, print_json, print_table


def test_finite_replaces_nan_and_inf_at_any_depth():
    doc = {"a": math.nan, "b": [1.5, math.inf, (-math.inf, 2)], "c": {"d": 0.25, "e": "x"}}
    assert finite(doc) == {"a": None, "b": [1.5, None, [None, 2]], "c": {"d": 0.25, "e": "x"}}


def test_print_json_is_strict(capsys):
    print_json({"p99_ms": math.nan, "n": 3})
    out = capsys.readouterr().out
    assert out.endswith("}\n") and json.loads(out) == {"p99_ms": None, "n": 3}
    assert "NaN" not in out


def test_print_table_plain_text(capsys, monkeypatch):
    # the fallback without rich: block the submodules too (an earlier test may have imported
    # them, and a cached `rich.console` is found without its parent)
    for name in ("rich", "rich.console", "rich.table"):
        monkeypatch.setitem(sys.modules, name, None)
    print_table([{"task": "cartpole", "rate": 1234.5678}, {"task": "arm", "rate": 2.0}],
                title="bench")
    assert capsys.readouterr().out.splitlines() == [
        "bench", "task      rate", "cartpole  1235", "arm       2   "]
    print_table([], title="empty")
    assert capsys.readouterr().out == "empty: (none)\n"


def test_cli_output_is_the_same_code():
    from edgerl.apps.cli import CliError, output

    assert output.print_table is print_table and output.print_json is print_json
    assert CliError is UserError


def test_cli_prints_a_library_user_error_as_one_line(capsys):
    """A UserError raised below the CLI (here ``edgerl bench sim``) is exit 1, no traceback."""
    from edgerl.apps.cli import main

    assert main(["bench", "sim", "--task", "cartpole", "--steps", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("edgerl bench: error: --num-envs, --steps") and "Traceback" not in err

