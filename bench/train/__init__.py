"""Training throughput and time to a solved task."""
