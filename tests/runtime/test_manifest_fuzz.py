"""A short run of benchmarks/fuzz_manifest.py: 2,000 mutated manifests through the loader,
only named BundleError subclasses may come out (the 10^6 run is in docs/reliability.md)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("fuzz_manifest",
                                                  ROOT / "benchmarks" / "fuzz_manifest.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module


def test_two_thousand_mutated_manifests_give_only_named_errors(tmp_path):
    """Failed on main: a non-UTF-8 or deeply nested manifest raised UnicodeDecodeError /
    RecursionError (and there was no verify_bundle)."""
    fuzz = _fuzz_module()
    result = fuzz.run_fuzz(2000, seed=7, workdir=tmp_path, crash_dir=tmp_path / "crashes")
    assert result.n == 2000
    assert result.crashes == [], result.crashes[:3]
    named = {k for k in result.outcomes if k != "loaded"}
    # the mutators reach every stage of the loader, not just the JSON parser
    assert {"ManifestEncodingError", "ManifestSyntaxError", "ManifestNestingError",
            "ManifestSchemaError", "BundlePathError"} <= named
    assert result.outcomes["loaded"] > 0  # some mutations keep a valid manifest
    assert sum(result.outcomes.values()) == 2000
    assert not list(tmp_path.glob("fuzz_manifest_*"))  # the scratch bundle is removed
