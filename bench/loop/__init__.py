"""The fixed-rate loop's own limit on this machine (the bare loop)."""
