"""The planner's cost: latency locally and over loopback (:mod:`.latency`), and load on the
planner server: closed-loop robots beside hostile clients (:mod:`.load`, :mod:`.hostile_test`),
open-loop sweeps (:mod:`.load_sweep`), the frames they send (:mod:`.frames`)."""
