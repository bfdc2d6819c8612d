"""A short run of edgerl.apps.experiments.probes.fuzz_manifest: 2,000 mutated manifests through
the loader, only named BundleError subclasses may come out (the 10^6 run is in
docs/reliability.md)."""

from __future__ import annotations

import importlib


def _fuzz_module():
    return importlib.import_module("edgerl.apps.experiments.probes.fuzz_manifest")


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
