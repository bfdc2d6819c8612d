"""Where bench ratios runs are kept: the results store, read back for the trend."""

from __future__ import annotations

from edgerl.bench.ratio_history import ratio_rows, record_ratios, recorded_lines
from edgerl.contract.results_store import read_results


def test_a_run_is_recorded_in_the_results_store_and_read_back(tmp_path):
    line = {"utc": "2026-12-06T04:00:00Z", "git": "abc", "seconds": 12.5,
            "load_before": [0.5, 0.4, 0.3], "load_after": [0.7, 0.5, 0.3],
            "ratios": {"loop/jitter_p99": {"ratio": 0.55, "ours": 2.1, "met": True},
                       "hil/rtt_p99": {"ratio": 1.4, "low": 1.1, "high": None, "met": True}}}
    path = record_ratios(tmp_path, line)
    assert path == tmp_path / "runtime-timing" / "results" / "bench-ratios-20261206t040000.json"
    doc = read_results(path)
    assert (doc.experiment, doc.question) == ("bench-ratios", "runtime-timing")
    assert doc.rows == ratio_rows(line) and doc.command and doc.date.endswith("Z")
    assert {"ratio": "loop/jitter_p99", "metric": "ratio", "value": 0.55} in doc.rows
    assert {"ratio": "hil/rtt_p99", "metric": "high", "value": None} in doc.rows
    assert recorded_lines(tmp_path) == [{"ratios": {"hil/rtt_p99": {"ratio": 1.4},
                                                    "loop/jitter_p99": {"ratio": 0.55}}}]
